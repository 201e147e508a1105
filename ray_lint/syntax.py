"""Whether text is Python, as both parsers the product relies on see it: libcst, which every rule
reads, and CPython's `ast`, which runs the code. A fix must keep both happy; the verifier applies fixes
too, so this sits below the engine and the experiments alike."""

from __future__ import annotations

import ast
import warnings

import libcst as cst


def python_parse(text: str) -> ast.Module:
    """CPython's parse, quietly: its SyntaxWarnings (`x is 1`) are Python's to give when the code runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text)


def parses(text: str, original: str) -> bool:
    """Whether fixed text is still Python: libcst must parse it, and so must `ast` where it parsed the original."""
    try:
        cst.parse_module(text)
    except Exception:
        return False
    try:
        python_parse(original)
    except (SyntaxError, ValueError, RecursionError):
        return True
    try:
        python_parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return True
