"""Size folding for the "large object" rules: exact for literal allocations, None for anything else."""

from __future__ import annotations

import libcst as cst
import pytest

from ray_lint.model import SemanticModel
from ray_lint.sizes import format_bytes, size_of


def size_of_last(source: str) -> int | None | str:
    """The folded size of the value of the module's last statement (`value = ...` or an expression)."""
    model = SemanticModel(cst.parse_module(source))
    statement = model.module.body[-1].body[0]  # type: ignore[attr-defined]
    expr = statement.value
    size = size_of(model, expr, model.module_scope, 1 << 30)
    if size is None:
        return "unknown"
    return size.bytes


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import numpy as np\nnp.zeros((5000, 5000))\n", 200_000_000),
        ("import numpy\nnumpy.ones(10**6, dtype=numpy.float32)\n", 4_000_000),
        ("import numpy as np\nnp.empty([1024, 1024], 'uint8')\n", 1024 * 1024),
        ("import numpy as np\nnp.full((1000, 1000), 7)\n", 8_000_000),
        ("import numpy as np\nnp.full((1000, 1000), 7, dtype=np.int16)\n", 2_000_000),
        ("import numpy as np\nnp.random.rand(1000, 2000)\n", 16_000_000),
        ("import numpy as np\nnp.random.randint(0, 10, size=(100, 100))\n", 80_000),
        ("import numpy as np\nnp.random.random((10, 10))\n", 800),
        ("import numpy as np\nnp.random.randint(0, 100, size=10**8, dtype=np.int8)\n", 10**8),
        ("import numpy as np\nnp.random.randint(0, 100, 1000, 'int16')\n", 2000),
        ("import torch\ntorch.zeros(1000, 1000)\n", 4_000_000),
        ("import torch\ntorch.randn((1000, 1000), dtype=torch.float64)\n", 8_000_000),
        ("import torch\ntorch.full((10, 10), 1.0, dtype=torch.half)\n", 200),
        ("bytes(50 * 1024 * 1024)\n", 50 * 1024 * 1024),
        ("bytearray(1 << 20)\n", 1 << 20),
        ("b'x' * 10**7\n", 10**7),
        ("10**6 * 'ab'\n", 2 * 10**6),
        ("[0] * 1000\n", 2000),
        ("[0.0] * 1000\n", 9000),
        ("N = 4096\nimport numpy as np\nnp.zeros((N, N), dtype=float)\n", 4096 * 4096 * 8),
        ("import numpy as np\nbase = np.zeros(1000)\nnp.zeros_like(base)\n", 8000),
        ("import numpy as np\nbase = np.zeros(1000)\nbase.copy()\n", 8000),
        ("import numpy as np\narray = np.zeros(100)\narray\n", 800),
        ("import numpy as np\nnp.arange(10**7)\n", 8 * 10**7),
        ("import numpy as np\nnp.arange(100, 1100, 10, dtype=np.int32)\n", 400),
        ("import numpy as np\nnp.linspace(0.0, 1.0, 1000)\n", 8000),
        ("import torch\ntorch.arange(1000)\n", 8000),
        ("import numpy as np\n{i: np.random.rand(2**18) for i in range(50)}\n", 50 * 2**18 * 8),
        ("import numpy as np\n[np.zeros(1000) for _ in range(10)]\n", 80_000),
        ("import numpy as np\nN = 20\nparts = [np.ones((N, N)) for part in range(N)]\nparts\n", 20 * 20 * 20 * 8),
        # unknown: nothing certain to fold
        ("import numpy as np\nnp.arange(n)\n", "unknown"),
        ("import numpy as np\n[np.zeros(1000) for _ in range(10) if keep(_)]\n", "unknown"),
        ("import numpy as np\n[np.zeros(1000) for _ in items]\n", "unknown"),
        ("import numpy as np\n[np.zeros(k) for k in range(10)]\n", "unknown"),
        ("import numpy as np\nnp.zeros(n)\n", "unknown"),
        ("import numpy as np\nnp.zeros((1000, 1000), dtype=kind)\n", "unknown"),
        ("import numpy as np\nnp.full((10, 10), value)\n", "unknown"),
        ("import numpy as np\nN = 10\nN = 20\nnp.zeros(N)\n", "unknown"),
        ("import numpy as np\nnp.zeros(*shape)\n", "unknown"),
        ("np.zeros(1000)\n", "unknown"),
        ("def bytes(n):\n    return n\nbytes(10**9)\n", "unknown"),
        ("[x] * 1000\n", "unknown"),
        ("'é' * 1000\n", "unknown"),
        ("load_array()\n", "unknown"),
        ("import numpy as np\nnp.zeros(1000).sum()\n", "unknown"),
    ],
)
def test_folded_size(source: str, expected: int | str) -> None:
    assert size_of_last(source) == expected


def test_marked_value_is_large_without_a_size() -> None:
    assert size_of_last("weights = load_weights()  # ray-lint: large\nweights\n") is None
    assert size_of_last("weights = load_weights()  # large\nweights\n") == "unknown"


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (12, 2_500, 40_000_000, 200_000_000, 3 * 10**9)] == [
        "12 bytes", "2.5 KB", "40 MB", "200 MB", "3.0 GB"
    ]
