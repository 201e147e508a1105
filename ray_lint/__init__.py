"""ray-lint: finds performance and correctness anti-patterns in Python code that uses Ray."""

from __future__ import annotations

__version__ = "0.1.0"
