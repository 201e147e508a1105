"""RAY092 ray-init-per-test: a Ray cluster started and stopped for every test instead of once per class or module."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.model import SemanticModel
from ray_lint.python_model import AFTER_ALL, CallSite, ClassInfo, FunctionInfo, iter_subtree, literal_string, path_to
from ray_lint.ray_api import tolerates_reinit
from ray_lint.rule import INIT_CALLED, Context, Invalid, Rule, Valid

FIXTURES = ("pytest.fixture", "pytest_asyncio.fixture")
# Per-test setup hooks and the teardown that pairs with each.
SETUP_METHODS = {"setUp": "tearDown", "asyncSetUp": "asyncTearDown", "setup_method": "teardown_method", "setup": "teardown"}
SETUP_FUNCTION = ("setup_function", "teardown_function")
# Names that show a test depends on per-process state that a shared cluster would leak between tests.
ISOLATION_NAMES = frozenset({"environ", "setenv", "putenv", "delenv", "unsetenv"})


@dataclass
class _Tests:
    """The tests of a module: functions (and methods of test classes) whose names start with `test`."""

    module_level: list[FunctionInfo] = field(default_factory=list)
    by_class: dict[int, list[FunctionInfo]] = field(default_factory=lambda: defaultdict(list))

    def all(self) -> list[FunctionInfo]:
        return [*self.module_level, *(t for tests in self.by_class.values() for t in tests)]


def _is_test_class(cls: ClassInfo) -> bool:
    """A class whose `test*` methods a runner collects: pytest's `Test*` classes, `unittest.TestCase` subclasses,
    and classes with a `setUp` that derive from some other base (a project's own TestCase subclass)."""
    if cls.node.name.value.startswith("Test"):
        return True
    bases = [_base_name(base.value) for base in cls.node.bases]
    if any(base is not None and base.endswith("TestCase") for base in bases):
        return True
    return bool(bases) and any(m.node.name.value in ("setUp", "asyncSetUp") for m in cls.methods)


def _base_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None


def _collect_tests(model: SemanticModel) -> _Tests:
    tests = _Tests()
    for info in model.functions:
        if not info.node.name.value.startswith("test"):
            continue
        if info.owner is None and info.parent_scope is model.module_scope:
            tests.module_level.append(info)
        elif info.owner is not None and info.owner.scope.parent is model.module_scope and _is_test_class(info.owner):
            tests.by_class[id(info.owner)].append(info)
    return tests


def _parameter_names(info: FunctionInfo) -> set[str]:
    params = info.node.params
    return {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}


def _used_fixtures(model: SemanticModel, node: cst.FunctionDef | cst.ClassDef, scope_info: FunctionInfo | ClassInfo) -> set[str]:
    """Fixture names named in `@pytest.mark.usefixtures("a", "b")` on a test or class."""
    names: set[str] = set()
    scope = scope_info.parent_scope if isinstance(scope_info, FunctionInfo) else scope_info.scope.parent
    for decorator in node.decorators:
        call = decorator.decorator
        if isinstance(call, cst.Call) and scope is not None and model.qualified_name(call.func, scope, AFTER_ALL) == "pytest.mark.usefixtures":
            names |= {text for arg in call.args if (text := literal_string(arg.value)) is not None}
    return names


def _mentions_isolation(function: cst.FunctionDef) -> bool:
    """Whether the function changes environment variables (`os.environ[...] = ...`, `monkeypatch.setenv`):
    the Ray docs' reason to keep a cluster per test."""
    for node in iter_subtree(function.body):
        if isinstance(node, cst.Attribute) and node.attr.value in ISOLATION_NAMES:
            return True
        if isinstance(node, cst.Name) and node.value in ISOLATION_NAMES:
            return True
    return False


def _in_try(function: cst.FunctionDef, call: cst.Call) -> bool:
    """Whether the call sits in the body of a `try` with handlers inside the function."""
    path = path_to(function, call, into_functions=False) or []
    return any(isinstance(node, cst.Try) and node.handlers for node in path)


def _connects(call: cst.Call) -> bool:
    """`ray.init(address=...)` with an address other than None/"local": connecting to a running cluster is cheap."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "address":
            value = arg.value
            return not ((isinstance(value, cst.Name) and value.value == "None") or literal_string(value) == "local")
    return False


class RayInitPerTest(Rule):
    code = "RAY092"
    name = "ray-init-per-test"
    message = "`ray.init` runs for every test: a Ray cluster is started and stopped per test instead of once"
    severity = Severity.WARNING
    category = "perf"
    in_tests = True  # test code is what it is about
    preview = True  # on real test suites, per-test clusters are mostly deliberate isolation (benchmarks/real)
    tokens = INIT_CALLED
    also_tokens = ("def test",)
    no_experiment = (
        "its cost is `ray.init()` itself, which the verifier turns into a no-op: every variant joins its one "
        "shared cluster"
    )
    docs = """
## What it does
Finds a test suite that starts a new Ray cluster for each test, when the same file shows at least
two tests that pay for it:
- `ray.init(...)` in `setUp` / `asyncSetUp` / `setup_method` / `setup` of a test class with two
  or more tests, or in a module's `setup_function` with two or more test functions;
- `ray.init(...)` in a function-scoped `@pytest.fixture` (no `scope=`, or `scope="function"`)
  that two or more tests of the file use (as a parameter, through another fixture, with
  `@pytest.mark.usefixtures`, or with `autouse=True`);
- the same `ray.init(...)` (the same arguments) in the bodies of two or more test functions.

In each case the call must start a fresh cluster every time: Ray is shut down after each test
(in the fixture after its `yield`, the matching `tearDown`, or the test itself), or the call
would raise if Ray were still running (no `ignore_reinit_error`, no `ray.is_initialized()`
check).

## Why is this bad?
Starting Ray launches the GCS, a raylet, an object store and a dashboard, then worker processes;
`ray.shutdown()` stops them all. Ray's testing tips put one start and stop at about 4.4 s on a
laptop, 90 s over 20 tests; measured on 2 vCPU with Ray 2.60, `ray.init(num_cpus=2)` takes
3.7-5.0 s warm. Most tests only need a running cluster, not a new one, so the suite spends most
of its time starting Ray.

ray-lint is silent when:
- the setup or fixture changes environment variables (`os.environ`, `monkeypatch.setenv`):
  Ray's docs keep a cluster per test for tests that depend on per-process state;
- the fixture is parametrized (`params=`), or its scope is not a literal;
- `ray.init` connects to a running cluster (`address=...`), which is cheap;
- the call may reuse a running Ray (`ignore_reinit_error=True`, `**kwargs`, an
  `if not ray.is_initialized():` check) and nothing shuts it down per test;
- test functions call `ray.init` with different arguments (each needs its own cluster), or the
  file has fewer than two tests that use it (e.g. a fixture in `conftest.py`).

## Example
```python
class TestPipeline(unittest.TestCase):
    def setUp(self):
        ray.init(num_cpus=2)

    def tearDown(self):
        ray.shutdown()

    def test_map(self): ...
    def test_filter(self): ...
```

## Use instead
```python
class TestPipeline(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        ray.init(num_cpus=2)

    @classmethod
    def tearDownClass(cls):
        ray.shutdown()
```
or a shared fixture:
```python
@pytest.fixture(scope="module")
def ray_cluster():
    ray.init(num_cpus=2)
    yield
    ray.shutdown()
```
Module-level `setup_module` / `teardown_module` work the same way for plain test functions;
give a function-scoped fixture `scope="module"` (or `"session"`) so its tests share one cluster.

## Fix safety
There is no automatic fix: sharing a cluster is only right when the tests do not depend on a
fresh one (killed actors, named actors, per-test `_system_config`, environment variables).

## References
- [Tips for testing Ray programs (Tip 3: share the Ray cluster across tests if possible)](https://docs.ray.io/en/latest/ray-core/examples/testing-tips.html)
- [ray.init](https://docs.ray.io/en/latest/ray-core/api/doc/ray.init.html)
- [pytest fixture scopes](https://docs.pytest.org/en/stable/how-to/fixtures.html#scope-sharing-fixtures-across-classes-modules-packages-or-session)
"""

    VALID = [
        Valid(
            "import ray\n\ndef test_one():\n    try:\n        ray.init(num_cpus=1)\n    except Exception:\n        pass\n    run()\n\n"
            "def test_two():\n    try:\n        ray.init(num_cpus=1)\n    except Exception:\n        pass\n    run()\n",
            "no shutdown, and a second `ray.init` is swallowed: the tests already share one cluster",
        ),
        Valid(
            "import ray\n\nclass Helper:\n    def setUp(self):\n        ray.init(num_cpus=1)\n\n"
            "    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n",
            "not a test class: no `Test` prefix and no base class",
        ),
        Valid(
            "import pytest\nimport ray\n\n@pytest.fixture(scope='module')\ndef cluster():\n    ray.init(num_cpus=2)\n    yield\n"
            "    ray.shutdown()\n\ndef test_a(cluster):\n    pass\n\ndef test_b(cluster):\n    pass\n",
            "a module-scoped fixture",
        ),
        Valid(
            "import unittest\nimport ray\n\nclass TestX(unittest.TestCase):\n    @classmethod\n    def setUpClass(cls):\n"
            "        ray.init(num_cpus=2)\n\n    @classmethod\n    def tearDownClass(cls):\n        ray.shutdown()\n\n"
            "    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n",
            "setUpClass",
        ),
        Valid(
            "import unittest\nimport ray\n\nclass TestX(unittest.TestCase):\n    def setUp(self):\n        ray.init(num_cpus=1)\n\n"
            "    def tearDown(self):\n        ray.shutdown()\n\n    def test_only(self):\n        pass\n",
            "one test",
        ),
        Valid(
            "import os\nimport unittest\nimport ray\n\nclass TestEnv(unittest.TestCase):\n    def setUp(self):\n"
            "        os.environ['RAY_FOO'] = '1'\n        ray.init(num_cpus=1)\n\n    def tearDown(self):\n        ray.shutdown()\n\n"
            "    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n",
            "per-test environment: isolation is the point",
        ),
        Valid(
            "import pytest\nimport ray\n\n@pytest.fixture(params=[1, 2])\ndef cluster(request):\n    ray.init(num_cpus=request.param)\n"
            "    yield\n    ray.shutdown()\n\ndef test_a(cluster):\n    pass\n\ndef test_b(cluster):\n    pass\n",
            "a parametrized fixture",
        ),
        Valid(
            "import ray\n\ndef test_small():\n    ray.init(num_cpus=1)\n    ray.shutdown()\n\ndef test_gpu():\n"
            "    ray.init(num_cpus=2, num_gpus=1)\n    ray.shutdown()\n",
            "different cluster shapes",
        ),
        Valid(
            "import unittest\nimport ray\n\nclass TestX(unittest.TestCase):\n    def setUp(self):\n"
            "        ray.init(ignore_reinit_error=True)\n\n    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n",
            "reuses the running cluster: started once",
        ),
        Valid(
            "import pytest\nimport ray\n\n@pytest.fixture\ndef cluster():\n    ray.init(num_cpus=2)\n    yield\n    ray.shutdown()\n",
            "a conftest fixture: no tests in this file",
        ),
        Valid(
            "import unittest\nimport ray\n\nclass TestX(unittest.TestCase):\n    def setUp(self):\n        ray.init(address='auto')\n\n"
            "    def tearDown(self):\n        ray.shutdown()\n\n    def test_a(self):\n        pass\n\n    def test_b(self):\n        pass\n",
            "connects to a running cluster",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfrom mylib.testing import RayTestBase\n\nclass PipelineChecks(RayTestBase):\n    def setUp(self):\n"
            "        ray.init(num_cpus=2)\n\n    def tearDown(self):\n        ray.shutdown()\n\n    def test_map(self):\n"
            "        pass\n\n    def test_filter(self):\n        pass\n",
            6,
            note="a project's own TestCase base",
        ),
        Invalid(
            "import unittest\nimport ray\n\nclass TestPipeline(unittest.TestCase):\n    def setUp(self):\n        ray.init(num_cpus=2)\n\n"
            "    def tearDown(self):\n        ray.shutdown()\n\n    def test_map(self):\n        pass\n\n    def test_filter(self):\n        pass\n",
            6,
        ),
        Invalid(
            "import pytest\nimport ray\n\n@pytest.fixture\ndef ray_cluster():\n    ray.init(num_cpus=2)\n    yield\n    ray.shutdown()\n\n"
            "def test_a(ray_cluster):\n    pass\n\ndef test_b(ray_cluster):\n    pass\n",
            6,
        ),
        Invalid(
            "import pytest\nimport ray\n\n@pytest.fixture(scope='function')\ndef ray_cluster():\n    ray.init(num_cpus=2)\n    yield\n"
            "    ray.shutdown()\n\n@pytest.fixture\ndef actor(ray_cluster):\n    return make_actor()\n\n"
            "def test_a(actor):\n    pass\n\n@pytest.mark.usefixtures('ray_cluster')\ndef test_b():\n    pass\n",
            6,
            note="used through another fixture and usefixtures",
        ),
        Invalid(
            "import pytest\nimport ray\n\n@pytest.fixture(autouse=True)\ndef ray_cluster():\n    ray.init()\n    yield\n    ray.shutdown()\n\n"
            "def test_a():\n    pass\n\ndef test_b():\n    pass\n",
            6,
            note="autouse",
        ),
        Invalid(
            "import ray\n\nclass TestActors:\n    def setup_method(self):\n        ray.init(num_cpus=1)\n\n"
            "    def teardown_method(self):\n        ray.shutdown()\n\n    def test_one(self):\n        pass\n\n    def test_two(self):\n        pass\n",
            5,
            note="pytest setup_method",
        ),
        Invalid(
            "import ray\n\ndef test_one():\n    ray.init(num_cpus=2)\n    try:\n        run()\n    finally:\n        ray.shutdown()\n\n"
            "def test_two():\n    ray.init(num_cpus=2)\n    ray.shutdown()\n",
            11,
            note="reported on the second test with the same arguments",
        ),
    ]

    def check(self, ctx: Context) -> None:
        model = ctx.model
        inits = [site for site in model.calls_to("ray.init") if not _connects(site.node)]
        if not inits:
            return
        tests = _collect_tests(model)
        if len(tests.all()) < 2:
            return
        shutdowns = {id(site.scope.function.node) for site in model.calls_to("ray.shutdown") if site.scope.function is not None}
        guarded = {id(site.scope.function.node) for site in model.calls_to("ray.is_initialized") if site.scope.function is not None}
        in_tests: dict[str, list[tuple[CallSite, FunctionInfo]]] = defaultdict(list)
        for site in inits:
            function = site.scope.function
            info = model.function_info(function.node) if function is not None and isinstance(function.node, cst.FunctionDef) else None
            if info is None or _mentions_isolation(info.node):
                continue
            fresh_each_time = id(info.node) in shutdowns or not (tolerates_reinit(site.node) or id(info.node) in guarded)
            message = self._setup_message(model, info, tests, shutdowns, fresh_each_time)
            if message is None:
                message = self._fixture_message(model, info, tests, fresh_each_time)
            if message is not None:
                ctx.report(site.node, message)
            elif info in tests.all() and id(info.node) in shutdowns and not _in_try(info.node, site.node):
                # without a shutdown in the test, a second `ray.init` raises (RAY090) rather than starting a cluster;
                # in a `try` whose handler swallows that error, the tests already share one cluster
                in_tests[re.sub(r"\s+", "", ctx.code_for(site.node)[len(ctx.code_for(site.node.func)) :])].append((site, info))
        for same in in_tests.values():
            names = sorted({info.node.name.value for _, info in same})
            if len(names) < 2:
                continue
            for site, _ in same[1:]:
                ctx.report(
                    site.node,
                    f"`{ctx.snippet(site.node, 40)}` starts the same Ray cluster in {len(names)} tests of this file",
                )

    def _setup_message(
        self, model: SemanticModel, info: FunctionInfo, tests: _Tests, shutdowns: set[int], fresh: bool
    ) -> str | None:
        """The message for `ray.init` in a per-test setup hook, when two or more tests run it."""
        name = info.node.name.value
        if info.owner is not None and name in SETUP_METHODS:
            count = len(tests.by_class.get(id(info.owner), []))
            teardown = model.method(info.owner, SETUP_METHODS[name])
            where = f"`{info.owner.node.name.value}`"
        elif info.owner is None and info.parent_scope is model.module_scope and name == SETUP_FUNCTION[0]:
            count = len(tests.module_level)
            teardown = next((f for f in model.functions if f.owner is None and f.node.name.value == SETUP_FUNCTION[1]), None)
            where = "this module"
        else:
            return None
        if count < 2 or not (fresh or (teardown is not None and id(teardown.node) in shutdowns)):
            return None
        return f"`ray.init` in `{name}` starts a Ray cluster for each of the {count} tests of {where}"

    def _fixture_message(self, model: SemanticModel, info: FunctionInfo, tests: _Tests, fresh: bool) -> str | None:
        """The message for `ray.init` in a function-scoped pytest fixture that two or more tests of the file use."""
        options = self._fixture_options(model, info)
        if options is None or not fresh:
            return None
        scope = options.get("scope")
        if scope is not None and literal_string(scope) != "function":
            return None
        if "params" in options or "**" in options:
            return None
        autouse = options.get("autouse")
        name = literal_string(options["name"]) if "name" in options else info.node.name.value
        if name is None:
            return None
        if autouse is not None and not (isinstance(autouse, cst.Name) and autouse.value == "False"):
            users = tests.by_class.get(id(info.owner), []) if info.owner is not None else tests.all()
        else:
            users = self._users(model, name, tests)
        if len(users) < 2:
            return None
        return f"Function-scoped fixture `{name}` starts a Ray cluster for each of the {len(users)} tests that use it"

    def _fixture_options(self, model: SemanticModel, info: FunctionInfo) -> dict[str, cst.BaseExpression | None] | None:
        """The keywords of the `@pytest.fixture(...)` decorator (`"**"` when it unpacks some), or None when the
        function is not a fixture."""
        for decorator in info.node.decorators:
            expr = decorator.decorator
            call = expr if isinstance(expr, cst.Call) else None
            func = call.func if call is not None else expr
            if model.qualified_name(func, info.parent_scope, AFTER_ALL) not in FIXTURES:
                continue
            options: dict[str, cst.BaseExpression | None] = {}
            for arg in call.args if call is not None else ():
                if arg.star == "**":
                    options["**"] = None
                elif arg.keyword is not None:
                    options[arg.keyword.value] = arg.value
                else:  # `@pytest.fixture("module")`: the old positional scope
                    options["scope"] = arg.value
            return options
        return None

    def _users(self, model: SemanticModel, fixture: str, tests: _Tests) -> list[FunctionInfo]:
        """Tests of the file that request `fixture`, directly or through other fixtures of the file."""
        requesting = {fixture}
        fixtures = [info for info in model.functions if self._fixture_options(model, info) is not None]
        changed = True
        while changed:
            changed = False
            for info in fixtures:
                if info.node.name.value not in requesting and _parameter_names(info) & requesting:
                    requesting.add(info.node.name.value)
                    changed = True
        users = []
        for test in tests.all():
            marked = _used_fixtures(model, test.node, test)
            if test.owner is not None:
                marked |= _used_fixtures(model, test.owner.node, test.owner)
            if (_parameter_names(test) | marked) & requesting:
                users.append(test)
        return users
