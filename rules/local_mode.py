"""RAY091 local-mode: `ray.init(local_mode=True)`, which Ray no longer supports."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Applicability, Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.python_model import CallSite, literal_number, literal_string
from ray_lint.rule import Context, FixPlan, Invalid, Rule, Valid

KEYWORD = "local_mode"
REMOVED_SINCE = "2.55"  # Ray 2.54.0's `ray.init` still accepts `local_mode` (with a warning); 2.55.0's raises


# The probe that runs a variant has connected it to the cluster and made `ray.init` a stand-in (the
# cluster is shared); `ray._private.worker.init` is still Ray's own function. Its `local_mode` check
# comes before it looks for a cluster or a connection, so it raises the same here as in a new process.
LOCAL = """
real_init = ray._private.worker.init  # Ray's own `ray.init`: the probe replaced only the `ray.init` name
real_init(local_mode={value})
"""
WITHOUT = """
ray.init()  # the probe's stand-in: this process is already connected to the cluster

@ray.remote
def where():
    return os.getpid()

pid = ray.get(where.remote(), timeout=30)
__ray_lint_evidence__ = {"right": f"a task ran in worker process {pid}, not in the driver ({os.getpid()})"}
"""


@dataclass(frozen=True)
class LocalModeValue:
    """The source text of the truthy `local_mode` value."""

    text: str


class LocalModeExperiment(ReproductionExperiment[LocalModeValue]):
    """Ray's own `ray.init` called with the finding's `local_mode` value, against `ray.init()` without
    it (the probe's connection) running a task in a worker process."""

    facts_type = LocalModeValue
    shares_driver = True
    expected = r"`local_mode` is no longer supported"

    model_only = "the code's own `ray.init` calls are stand-ins when it runs here, so it cannot show the error"

    def plan(self, subject: Subject) -> Plan:
        """Always the model: the script's own `ray.init` calls are stand-ins when a variant runs, so the
        script as written cannot show the error."""
        return self.model(subject)

    def model(self, subject: Subject) -> Plan:
        value = self.facts(subject).text
        return Plan(
            Variant(f"local_mode={value}", script(LOCAL.format(value=value))),
            Variant("without local_mode", script(WITHOUT)),
            "modelled",
            f"Ray's own `ray.init(local_mode={value})`, and a task run without local mode",
        )


class LocalMode(Rule):
    code = "RAY091"
    name = "local-mode"
    message = "`ray.init(local_mode=True)` raises: Ray no longer supports local mode"
    severity = Severity.ERROR
    category = "api-misuse"
    fixable = True
    tokens = (KEYWORD,)
    experiment = LocalModeExperiment()
    docs = """
## What it does
Finds `ray.init(...)` called with `local_mode` set to a truthy literal (`True`, a non-zero number,
a non-empty string), as a keyword or inside a literal `**{"local_mode": True}`. `ray.init` is
recognised through aliases (`import ray as r; r.init(...)`, `from ray import init`).

## Why is this bad?
Local mode ran every task inline in the driver process. It was deprecated in Ray 2.0 and removed in
Ray 2.55.0 ([ray-project/ray#60647](https://github.com/ray-project/ray/pull/60647); 2.54.0 still
runs it, with a deprecation warning). From 2.55 on, `ray.init` checks `if local_mode:` before it
starts or connects to a cluster and raises:

```
RuntimeError: `local_mode` is no longer supported. For interactive debugging consider using the Ray distributed debugger.
```

So the program (or every test that uses the fixture) fails at start-up. The check is on the value's
truth, so `local_mode=1` raises as well, and `local_mode=False` (the default) is accepted. Ray's
[testing tips](https://docs.ray.io/en/latest/ray-core/examples/testing-tips.html) page still
recommends `ray.init(local_mode=True)` (Tip 2) for debugging tests; that advice no longer works.

ray-lint is silent on `local_mode=False`, `0` and `None`, and on a value it cannot read (a
variable, a command-line flag): such a call raises only when the value is truthy at run time. It
is silent, too, where the call still works: in a project that declares only Rays older than 2.55
(`ray==2.46.0` in its `pyproject.toml`, say; see
[the Ray a project runs](../guide.md#the-ray-a-project-runs)), and in a branch kept for older
versions (`if ray.__version__ < "2.55":`). A project that allows 2.55 or later (`ray>=2.7`) is
reported: the call fails on the newest Ray it allows.

## Example
```python
ray.init(local_mode=True)
```

## Use instead
```python
ray.init(num_cpus=1)  # tasks that request one CPU run one at a time
```
To step through a task, put `breakpoint()` in it and attach the
[Ray Distributed Debugger](https://docs.ray.io/en/latest/ray-observability/ray-distributed-debugger.html)
(the default debugger since Ray 2.39, `RAY_DEBUG=1`); set `RAY_DEBUG_POST_MORTEM=1` to freeze a task
that fails with an exception until the debugger attaches. The older pdb-based `ray debug` command
still works with `RAY_DEBUG=legacy` but is deprecated. To unit-test the logic itself without a
cluster, keep the plain function and wrap it separately (`square_remote = ray.remote(square)`),
then call `square` directly in the test.

## Fix safety
The fix removes the `local_mode` argument, which makes the call valid. It is unsafe: the program
then starts a real local cluster, and tasks and actors run in separate worker processes instead of
inline in the driver. Breakpoints and `print` in tasks no longer reach the driver's terminal
directly, arguments and results are serialized, global state in the driver is not shared with
tasks, and start-up takes seconds. Code that relied on any of this behaves differently. It is not
offered when the line it removes holds a comment, which would go with it.

## References
- [`ray.init` (`local_mode`: "No longer supported")](https://docs.ray.io/en/latest/ray-core/api/doc/ray.init.html)
- [ray-project/ray#60647: Remove support for `local_mode`](https://github.com/ray-project/ray/pull/60647)
- [Ray Distributed Debugger](https://docs.ray.io/en/latest/ray-observability/ray-distributed-debugger.html)
- [Using the Ray Debugger (legacy)](https://docs.ray.io/en/latest/ray-observability/user-guides/debug-apps/ray-debugging.html)
- [Tips for testing Ray programs (stale Tip 2)](https://docs.ray.io/en/latest/ray-core/examples/testing-tips.html)
"""

    VALID = [
        Valid("import ray\nray.init(local_mode=False)\n", "False is the default and Ray accepts it"),
        Valid("import ray\nray.init(num_cpus=2, local_mode=0)\n", "a falsy literal"),
        Valid("import ray\nray.init(local_mode=None)\n", "None is falsy"),
        Valid("import ray\nray.init()\n", "no local_mode"),
        Valid("import myframework\nmyframework.init(local_mode=True)\n", "another library's init"),
        Valid("from myframework import init\nimport ray\ninit(local_mode=True)\n", "another library's init"),
        Valid("import myframework as ray\nray.init(local_mode=True)\n", "`ray` is another module here"),
        Valid("import ray\n\ndef start(debug):\n    ray.init(local_mode=debug)\n", "value unknown"),
        Valid("import ray\nray.init(local_mode=args.local_mode)\n", "value unknown (a command-line flag)"),
        Valid("import ray\nray.init(**options)\n", "the keywords are not visible"),
        Valid('import ray\nray.init(**{"local_mode": False})\n', "a literal dict with a falsy value"),
        Valid("import ray\nray.util.spark.setup_ray_cluster(local_mode=True)\n", "not ray.init"),
        Valid(
            'import ray\n\nif ray.__version__ < "2.55":\n    ray.init(local_mode=True)\nelse:\n    ray.init(num_cpus=1)\n',
            "kept for the Rays that still run local mode",
        ),
        Valid('import ray\nray.init()  # local_mode=True used to work\ns = "ray.init(local_mode=True)"\n', "text only"),
    ]
    INVALID = [
        Invalid("import ray\nray.init(local_mode=True)\n", 2, fixed="import ray\nray.init()\n"),
        Invalid(
            "import ray as r\nr.init(num_cpus=2, local_mode=True)\n",
            2,
            fixed="import ray as r\nr.init(num_cpus=2)\n",
        ),
        Invalid(
            "from ray import init\ninit(local_mode=True, num_cpus=1)\n",
            2,
            fixed="from ray import init\ninit(num_cpus=1)\n",
        ),
        Invalid("import ray\nray.init(local_mode=1)\n", 2, fixed="import ray\nray.init()\n", note="truthy literal"),
        Invalid(
            "import ray\n\ndef main():\n    ray.init(\n        num_cpus=4,\n        local_mode=True,\n    )\n",
            6,
            fixed="import ray\n\ndef main():\n    ray.init(\n        num_cpus=4,\n    )\n",
        ),
        Invalid(
            "import ray\nray.init(\n    num_cpus=1,  # one task at a time\n    local_mode=True,\n)\n",
            4,
            fixed="import ray\nray.init(\n    num_cpus=1,  # one task at a time\n)\n",
            note="the comment of the line that stays is kept",
        ),
        Invalid(
            "import ray\nray.init(\n    num_cpus=1,\n    local_mode=True,  # debug\n)\n",
            4,
            note="no fix: it would drop the comment on the line it removes",
        ),
        Invalid(
            "import ray\nray.init(\n    local_mode=True,\n    ignore_reinit_error=True,\n)\n",
            3,
            fixed="import ray\nray.init(\n    ignore_reinit_error=True,\n)\n",
        ),
        Invalid(
            "import ray\nray.init(\n    local_mode=True,\n)\n",
            3,
            fixed="import ray\nray.init()\n",
        ),
        Invalid(
            "import pytest\nimport ray\n\n@pytest.fixture\ndef ray_local():\n    ray.init(local_mode=True)\n"
            "    yield\n    ray.shutdown()\n",
            6,
            fixed="import pytest\nimport ray\n\n@pytest.fixture\ndef ray_local():\n    ray.init()\n"
            "    yield\n    ray.shutdown()\n",
        ),
        Invalid(
            'import ray\nray.init(**{"local_mode": True})\n',
            2,
            fixed="import ray\nray.init()\n",
        ),
        Invalid(
            'import ray\nray.init(num_cpus=1, **{"local_mode": True, "namespace": "dev"})\n',
            2,
            fixed='import ray\nray.init(num_cpus=1, **{"namespace": "dev"})\n',
        ),
        Invalid(
            "import ray\ninit = ray.init\ninit(local_mode='yes')\n",
            3,
            fixed="import ray\ninit = ray.init\ninit()\n",
            note="a non-empty string is truthy",
        ),
    ]

    def check(self, ctx: Context) -> None:
        if not self.ray_versions.may_run(REMOVED_SINCE):  # a project pinned below 2.55: local mode still runs
            return
        for site in ctx.model.calls_to("ray.init"):
            if not ctx.model.version_gated(site.node, site.scope):
                self._check_call(ctx, site)

    def _check_call(self, ctx: Context, site: CallSite) -> None:
        call = site.node
        for index, arg in enumerate(call.args):
            if arg.keyword is not None and arg.keyword.value == KEYWORD:
                if _truthy(arg.value) is True:
                    self._report(ctx, arg, arg.value, _removal(ctx, call.args, index, call.whitespace_before_args))
                    return
            elif arg.star == "**" and isinstance(arg.value, cst.Dict):
                elements = arg.value.elements
                for position, element in enumerate(elements):
                    if not isinstance(element, cst.DictElement) or literal_string(element.key) != KEYWORD:
                        continue
                    if _truthy(element.value) is not True:
                        break
                    if len(elements) > 1:
                        edits = _removal(ctx, elements, position, arg.value.lbrace.whitespace_after)
                    else:  # `**{"local_mode": True}` goes as a whole
                        edits = _removal(ctx, call.args, index, call.whitespace_before_args)
                    self._report(ctx, element, element.value, edits)
                    return

    def _report(
        self, ctx: Context, node: cst.CSTNode, value: cst.BaseExpression, edits: list[tuple[cst.CSTNode, str]]
    ) -> None:
        ctx.report(
            node,
            f"`local_mode={ctx.snippet(value, 20)}` makes `ray.init` raise `RuntimeError` since Ray {REMOVED_SINCE}",
            fix=FixPlan(
                "Remove `local_mode` (tasks then run in worker processes, not inline in the driver)",
                tuple(edits),
                Applicability.UNSAFE,
            ),
            facts=LocalModeValue(ctx.code_for(value)),
        )


def _truthy(expr: cst.BaseExpression) -> bool | None:
    """The truth of a literal: `True`/`False`/`None`, a number or a string; None when it is not a literal."""
    if isinstance(expr, cst.Name):
        return {"True": True, "False": False, "None": False}.get(expr.value)
    number = literal_number(expr)
    if number is not None:
        return number != 0
    text = literal_string(expr)
    if text is not None:
        return text != ""
    return None


def _removal(
    ctx: Context, items: Sequence[cst.Arg | cst.BaseDictElement], index: int, opening: cst.BaseParenthesizableWhitespace
) -> list[tuple[cst.CSTNode, str]]:
    """Deletions that take `items[index]` out of an argument list or dict display. The source is edited in
    place (not regenerated), so the indentation and comments of the other items stay as they are."""
    item = items[index]
    edits: list[tuple[cst.CSTNode, str]] = [(item, "")]
    if index + 1 < len(items):  # another item follows: this one's comma goes with it
        edits += _comma_removal(item.comma)
    elif index > 0:  # the last one
        previous = items[index - 1].comma
        closing = item.comma.whitespace_after if isinstance(item.comma, cst.Comma) else getattr(item, "whitespace_after_arg", None)
        if (
            isinstance(previous, cst.Comma)
            and isinstance(previous.whitespace_after, cst.ParenthesizedWhitespace)
            and isinstance(closing, cst.ParenthesizedWhitespace)
        ):  # one item a line: keep the previous line's comment, take the closing bracket's indentation
            if isinstance(item.comma, cst.Comma):
                edits += [(item.comma, ""), *_whitespace_removal(item.comma.whitespace_before)]
            else:
                edits.append((previous, ""))
            edits.append((closing, ""))
            kept = ctx.code_for(previous.whitespace_after.first_line) + _indentation_before_end(ctx, closing)
            edits.append((previous.whitespace_after, kept))
        else:  # the previous comma goes; a trailing comma stays, now after the previous item
            edits += _comma_removal(previous)
    else:  # the only one: `ray.init(\n    local_mode=True,\n)` becomes `ray.init()`
        edits += _comma_removal(item.comma) + _whitespace_removal(opening)
    return edits


def _comma_removal(comma: cst.Comma | cst.MaybeSentinel) -> list[tuple[cst.CSTNode, str]]:
    """The comma and the whitespace (newlines, comments) on both sides of it: a Comma's own span is the `,`."""
    if not isinstance(comma, cst.Comma):
        return []
    return [(comma, ""), *_whitespace_removal(comma.whitespace_before), *_whitespace_removal(comma.whitespace_after)]


def _whitespace_removal(whitespace: cst.BaseParenthesizableWhitespace) -> list[tuple[cst.CSTNode, str]]:
    if isinstance(whitespace, cst.SimpleWhitespace) and not whitespace.value:
        return []
    return [(whitespace, "")]


def _indentation_before_end(ctx: Context, whitespace: cst.CSTNode) -> str:
    """The indentation of the closing bracket that `whitespace` (which ends with a line break and an indent) leads to."""
    end = ctx.model.position(whitespace).end
    line = ctx.model.module.code.splitlines(keepends=True)[end.line - 1]
    indentation = line[: end.column]
    return indentation if not indentation.strip() else ""
