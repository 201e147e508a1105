"""RAY000 file-error: a file ray-lint could not read, parse or analyse."""

from __future__ import annotations

from functools import cache

from ray_lint.diagnostics import FILE_ERROR_CODE, FILE_ERROR_NAME, Severity
from ray_lint.rule import Context, Invalid, Rule, Valid, all_rules


class FileError(Rule):
    """The engine reports this code itself; the rule exists so that it has docs, examples and a selector."""

    code = FILE_ERROR_CODE
    name = FILE_ERROR_NAME
    message = "The file could not be read, parsed or analysed"
    severity = Severity.ERROR
    category = "file"
    docs = """
## What it does
Reports a file that ray-lint could not check: a syntax error, bytes that are not valid in the
file's encoding, a NUL byte (a binary file with a `.py` name), a file that cannot be read (a
directory named `x.py`, missing permissions), a file over the 10 MiB limit, or an internal error
in one rule (the message names the rule; other rules' findings in the file still come out).

ray-lint parses only files that mention what its rules look for (such as `.remote(`), so a
syntax error in a file that never uses Ray is left to your other tools.

## Why is this bad?
A file that cannot be checked may hide any of the problems the other rules find.

## Example
```python
ref = process.remote(   # never closed
```

## Use instead
Fix the syntax error, or save the file as UTF-8.

## Fix safety
There is no fix.

## References
- [Python: source code encoding](https://peps.python.org/pep-0263/)
"""
    VALID = [Valid("import ray\nref = f.remote(1)\n"), Valid("print('no Ray here'\n", "not parsed: nothing for the rules")]
    INVALID = [Invalid("import ray\nref = f.remote(\n", 2), Invalid("import ray\nfor x in xs\n    f.remote(x)\n", 2)]

    def wants(self, text: str) -> bool:
        """The files the other rules would parse, so that RAY000 alone still reports their syntax errors."""
        return any(rule.wants(text) for rule in _other_rules())

    def check(self, ctx: Context) -> None:
        """The engine reports file errors before and around the rules; there is nothing to do here."""


@cache
def _other_rules() -> tuple[Rule, ...]:
    return tuple(rule() for rule in all_rules() if rule is not FileError)
