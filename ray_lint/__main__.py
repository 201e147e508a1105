from __future__ import annotations

from ray_lint.cli import main

raise SystemExit(main())
