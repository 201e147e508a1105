"""What makes a numpy array, for the rules that follow arrays handed to Ray and changed in place."""

from __future__ import annotations

# numpy calls whose result is always a fresh ndarray (with a non-object dtype unless `dtype=object`).
NUMPY_MAKERS = frozenset(
    f"numpy.{name}"
    for name in (
        "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace",
        "logspace", "eye", "identity", "array", "asarray", "ascontiguousarray", "copy", "concatenate", "stack", "vstack",
        "hstack", "tile", "random.rand", "random.randn", "random.random", "random.random_sample", "random.uniform",
        "random.normal", "random.randint", "random.standard_normal", "random.permutation",
    )
)
