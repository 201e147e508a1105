"""The semantic model on small modules: names, remote definitions, actors, ObjectRef flow, loops, scopes."""

from __future__ import annotations

import libcst as cst
import pytest

from ray_lint.analyses.actor_state import mutates_state
from ray_lint.analyses.loop_dependence import (
    carried_names,
    loop_results,
    repeats_discarded_call,
    sequential_by_design,
    single_actor,
)
from ray_lint.model import SemanticModel


def model_of(source: str) -> SemanticModel:
    return SemanticModel(cst.parse_module(source))


def code(model: SemanticModel, node: cst.CSTNode) -> str:
    return model.module.code_for_node(node)


@pytest.mark.parametrize(
    "source, call",
    [
        ("import ray\nray.get(x)\n", "ray.get(x)"),
        ("import ray as r\nr.get(x)\n", "r.get(x)"),
        ("from ray import get as fetch\nfetch(x)\n", "fetch(x)"),
        ("from ray import get\nget(x)\n", "get(x)"),
        ("import ray\nblock = ray.get\nblock(x)\n", "block(x)"),
        ("from ray import *\nget(x)\n", "get(x)"),
        ("try:\n    import ray\nexcept ImportError:\n    ray = None\ndef f():\n    return ray.get(x)\n", "ray.get(x)"),
        ("def f():\n    import ray\n    return ray.get(x)\n", "ray.get(x)"),
    ],
)
def test_aliases_resolve_to_ray_get(source: str, call: str) -> None:
    model = model_of(source)
    assert [code(model, site.node) for site in model.calls_to("ray.get")] == [call]


@pytest.mark.parametrize(
    "source",
    [
        "ray.get(x)\n",  # never imported
        "import ray\nray = Session()\nray.get(x)\n",  # rebound before the call
        "import ray\ndef f(ray):\n    return ray.get(x)\n",  # a parameter shadows it
        "from mylib import get\nget(x)\n",
    ],
)
def test_non_ray_names_do_not_resolve(source: str) -> None:
    assert model_of(source).calls_to("ray.get") == ()


def test_submodule_imports_and_aliases() -> None:
    model = model_of("import ray.data as rd\nfrom ray.util import ActorPool\nrd.read_parquet(p)\nActorPool(a)\n")
    assert [code(model, s.node) for s in model.calls_to("ray.data.read_parquet")] == ["rd.read_parquet(p)"]
    assert [code(model, s.node) for s in model.calls_to("ray.util.ActorPool")] == ["ActorPool(a)"]
    assert model.imports_module("ray")


def test_remote_definitions_in_every_form() -> None:
    model = model_of(
        "import ray\n"
        "@ray.remote\ndef a(): pass\n"
        "@ray.remote(num_gpus=1, num_cpus=2)\ndef b(): pass\n"
        "def c(): pass\nrc = ray.remote(c)\n"
        "def d(): pass\nrd = ray.remote(num_cpus=4)(d)\n"
        "opts = {}\ndef e(): pass\nre_ = ray.remote(**opts)(e)\n"
        "def plain(): pass\n"
        "b.options(num_gpus=2).remote()\n"
    )
    remotes = {r.name: r for r in model.remote_defs}
    assert set(remotes) == {"a", "b", "c", "d", "e"}
    assert all(r.kind == "task" for r in remotes.values())
    assert set(remotes["b"].options.values) == {"num_gpus", "num_cpus"}
    assert [code(model, v) for v in remotes["b"].option_values("num_gpus")] == ["1", "2"]
    assert set(remotes["d"].options.values) == {"num_cpus"}
    assert remotes["e"].options_unknowable and not remotes["d"].options_unknowable
    end = 1 << 60  # resolve each name as the end of the module sees it
    named = {name: model.remote_def_of(cst.Name(name), model.module_scope, end) for name in ("a", "c", "rc", "rd", "plain")}
    assert named["a"] is remotes["a"] and named["rc"] is remotes["c"] and named["rd"] is remotes["d"]
    assert named["c"] is None and named["plain"] is None, "`rc = ray.remote(c)` leaves `c` the plain function"


HANDLE_LISTS = """\
import ray

@ray.remote
class A:
    def m(self): pass

@ray.remote
class B:
    def m(self): pass

chief = A.remote()
workers = [A.remote() for _ in range(3)]
group = [chief] + workers
mixed = [chief, B.remote()]

class Cluster:
    def __init__(self):
        self.workers = group

    def calls(self):
        return [w.m.remote() for w in self.workers]

    def starred(self, more):
        for w in [*more, chief]:
            w.m.remote()

for w in group:
    w.m.remote()
for w in mixed:
    w.m.remote()
workers[0].m.remote()
for w in enumerate(group):
    w.m.remote()
"""


def test_a_handle_taken_from_a_list_of_one_actor_class_knows_its_class() -> None:
    model = model_of(HANDLE_LISTS)
    found = []
    for site in model.calls_by_tail["remote"]:
        submission = model.submission(site.node)
        if submission is not None and submission.kind == "actor-method":
            found.append((code(model, site.node), submission.remote.name if submission.remote else None))
    assert found == [
        ("w.m.remote()", "A"),  # a list on `self`, written once as `self.workers = group`
        ("w.m.remote()", None),  # a list with an unpacked part: unknown
        ("w.m.remote()", "A"),  # `[chief] + workers`
        ("w.m.remote()", None),  # two classes
        ("workers[0].m.remote()", "A"),
        ("w.m.remote()", None),  # `enumerate(...)`: not a list of handles
    ]


def test_actor_kinds() -> None:
    model = model_of(
        "import ray\n"
        "@ray.remote\nclass Sync:\n    def m(self): pass\n"
        "@ray.remote\nclass Async:\n    async def m(self): pass\n"
        "@ray.remote(max_concurrency=8)\nclass Threaded:\n    def m(self): pass\n"
        "@ray.remote\nclass OptionThreaded:\n    def m(self): pass\n"
        "h = OptionThreaded.options(max_concurrency=4).remote()\n"
        "@ray.remote(max_concurrency=1)\nclass One:\n    def m(self): pass\n"
    )
    actors = {r.name: r for r in model.remote_defs}
    assert all(r.kind == "actor" for r in actors.values())
    kinds = {name: (r.is_async_actor, r.is_threaded_actor) for name, r in actors.items()}
    assert kinds == {
        "Sync": (False, False),
        "Async": (True, False),
        "Threaded": (False, True),
        "OptionThreaded": (False, True),
        "One": (False, False),
    }


def test_submissions_tell_tasks_actor_creation_and_methods_apart() -> None:
    model = model_of(
        "import ray\nimport mymod\n"
        "@ray.remote\ndef f(): pass\n"
        "@ray.remote\nclass A:\n    def m(self): pass\n"
        "f.remote()\nh = A.remote()\nh.m.remote()\nmymod.task.remote()\nf.options(num_cpus=1).remote()\n"
    )
    kinds = {
        code(model, site.node): model.submission(site.node).kind  # type: ignore[union-attr]
        for site in model.calls_by_tail["remote"]
    }
    assert kinds == {
        "f.remote()": "task",
        "A.remote()": "actor-create",
        "h.m.remote()": "actor-method",
        "mymod.task.remote()": "unknown",
        "f.options(num_cpus=1).remote()": "task",
    }


def _origin_of_get(source: str) -> str | None:
    model = model_of(source)
    (site,) = model.calls_to("ray.get")
    origin = model.ref_origin(site.node.args[0].value, site.scope, site.index)
    return None if origin is None else origin.kind


@pytest.mark.parametrize(
    "source, kind",
    [
        ("import ray\nray.get(f.remote())\n", "ref"),
        ("import ray\nr = f.remote()\nray.get(r)\n", "ref"),
        ("import ray\nr = ray.put(x)\nray.get(r)\n", "ref"),
        ("import ray\nrefs = [f.remote(i) for i in xs]\nray.get(refs)\n", "ref-list"),
        ("import ray\nrefs = [f.remote(1), g.remote(2)]\nray.get(refs)\n", "ref-list"),
        ("import ray\nrefs = []\nfor i in xs:\n    refs.append(f.remote(i))\nray.get(refs)\n", "ref-list"),
        ("import ray\nready, rest = ray.wait(refs)\nray.get(ready)\n", None),
        ("import ray\n@ray.remote\nclass A: pass\nray.get(A.remote())\n", None),  # a handle, not a ref
        ("import ray\nr = f.remote()\nr = 3\nray.get(r)\n", None),  # rebound
    ],
)
def test_ref_flow(source: str, kind: str | None) -> None:
    assert _origin_of_get(source) == kind


def test_loops_and_carried_names() -> None:
    model = model_of(
        "import ray\nx = 0\ni = 0\nwhile i < n:\n    y = x + 1\n    x = ray.get(step.remote(y))\n    i += 1\n"
        "total = sum(v for v in vs)\n"
        "for a in ray.get(refs):\n    pass\n"
    )
    kinds = sorted(loop.kind for loop in model.loops)
    assert kinds == ["comprehension", "for", "while"]
    (step,) = model.calls_by_tail["remote"]
    loop = step.loop
    assert loop is not None and loop.kind == "while"
    assert carried_names(loop, {"x", "y", "i", "n"}, step.index) == {"x", "i"}
    (get_refs,) = [s for s in model.calls_to("ray.get") if "refs" in code(model, s.node)]
    assert get_refs.loop is None  # a `for` loop's iterable is evaluated once, outside the loop


def test_functions_reset_the_loop_context_and_know_async_scopes() -> None:
    model = model_of(
        "import ray\nfor x in xs:\n    def helper():\n        return ray.get(f.remote())\n"
        "async def main():\n    await g()\n"
    )
    (site,) = model.calls_to("ray.get")
    assert site.loop is None
    assert site.scope.function is not None and not site.scope.is_async
    (main,) = [f for f in model.functions if f.node.name.value == "main"]
    assert main.is_async and main.scope.is_async


def test_deeply_nested_code_does_not_hit_the_recursion_limit() -> None:
    depth = 2000
    source = "import ray\nx = " + "[" * 90 + "f.remote()" + "]" * 90 + "\n" + "y = 1\n" * depth
    model = model_of(source)
    assert len(model.calls_by_tail["remote"]) == 1


def _results_of_only_loop(source: str):  # type: ignore[no-untyped-def]
    model = model_of(source)
    (loop,) = [loop for loop in model.loops if loop.parent is None]
    return model, loop_results(model, loop)


def test_loop_results_follow_values_in_statement_order() -> None:
    model, results = _results_of_only_loop(
        "import ray\nfor block, meta in items:\n    if meta.rows is None:\n        rows = ray.get(count.remote(block))\n"
        "        meta = replace(meta, rows=rows)\n"
    )
    assert results.derived == {"rows", "meta"}
    # `meta` is rebound from the loop's iterable each time, so the `if` does not read a result
    (get,) = model.calls_to("ray.get")
    assert get.node not in results.guarded_nodes and not results.exits_on_result


def test_loop_results_see_carried_values_guards_exits_and_polling() -> None:
    model, results = _results_of_only_loop(
        "import ray, time\nnode = None\nwhile True:\n    if node is None:\n        node = ray.get(h.remote())\n"
        "    done = ray.get(check.remote())\n    if done:\n        break\n    time.sleep(1)\n"
    )
    first_get = model.calls_to("ray.get")[0]
    assert first_get.node in results.guarded_nodes  # runs only while an earlier result says so
    assert results.exits_on_result and results.polls
    (loop,) = model.loops
    assert loop_results(model, loop) is results  # computed once per loop


def test_requests_of_remote_code() -> None:
    model = model_of(
        "import ray\n"
        "@ray.remote\ndef default(): pass\n"
        "@ray.remote(num_cpus=2, num_gpus=0)\ndef two(): pass\n"
        "two.options(num_cpus=4).remote()\n"
        "@ray.remote(num_cpus=n)\ndef variable(): pass\n"
        "@ray.remote(resources={'GPU': 1})\ndef custom(): pass\n"
        "@ray.remote\ndef handed(): pass\n"
        "launch(handed)\n"
        "handed.remote()\n"
        "@ray.remote\ndef used(): pass\n"
        "refs = [used.remote(), used.options(num_gpus=0.5).remote()]\n"
    )
    remotes = {r.name: r for r in model.remote_defs}
    shares = {name: model.cpu_share(r) for name, r in remotes.items()}
    assert shares == {"default": 1.0, "two": 4.0, "variable": None, "custom": 1.0, "handed": None, "used": 1.0}
    gpus = {name: model.gpu_request(r) for name, r in remotes.items()}
    assert gpus == {
        "default": "none", "two": "none", "variable": "none", "custom": "requested", "handed": "unknown", "used": "requested",
    }


def test_remote_of_scope_covers_bodies_and_comprehensions_not_nested_functions() -> None:
    model = model_of(
        "import ray\n"
        "@ray.remote\nclass A:\n    def m(self, xs):\n        return [g(x) for x in xs]\n"
        "@ray.remote\ndef t():\n    def inner():\n        h()\n    k()\n"
        "def plain():\n    p()\n"
    )
    owners = {}
    for site in model.calls:
        owner = model.remote_of_scope(site.scope)
        owners[code(model, site.node.func)] = owner[0].name if owner else None
    assert owners == {"g": "A", "h": None, "k": "t", "p": None}


@pytest.mark.parametrize(
    "body, stateful",
    [
        ("    def m(self, x):\n        return self.model(x)\n", False),
        ("    def m(self, x):\n        return self.cache.get(x)\n", False),
        ("    def m(self, x):\n        self.n += 1\n", True),
        ("    def m(self, x):\n        self.seen[x] = 1\n", True),
        ("    def m(self, x):\n        del self.tmp\n", True),
        ("    def m(self, x):\n        self.buf.append(x)\n", True),
        ("    def m(self, x):\n        buf = self.buf\n        buf.extend(x)\n", True),
        ("    def m(self, x):\n        return self.env.step(x)\n", True),
        ("    def m(self, x):\n        self._save(x)\n    def _save(self, x):\n        self.last = x\n", True),
        ("    def m(self, x):\n        self._peek(x)\n    def _peek(self, x):\n        return self.last\n", False),
        ("    def m(self, x):\n        global TOTAL\n        TOTAL += x\n", True),
        ("    def m(self, x):\n        def cb():\n            self.done = True\n        return cb\n", True),
        ("    def m(self, x):\n        return self.m(x - 1) if x else 0\n", False),
    ],
)
def test_mutates_state(body: str, stateful: bool) -> None:
    model = model_of("import ray\n@ray.remote\nclass A:\n" + body)
    (actor,) = model.remote_defs
    assert actor.cls is not None
    method = model.method(actor.cls, "m")
    assert method is not None
    assert mutates_state(model, method) is stateful


def test_stores_record_attribute_and_subscript_writes() -> None:
    model = model_of("import os\nos.environ['A'] = '1'\nself.x += 2\ndel d[k]\na.b, c = pair\nx = 1\n")
    assert [(code(model, s.target), s.kind, s.value is not None) for s in model.stores] == [
        ("os.environ['A']", "assign", True),
        ("self.x", "augassign", True),
        ("d[k]", "del", False),
        ("a.b", "assign", False),
    ]


def test_is_cpu_count() -> None:
    model = model_of(
        "import os\nimport multiprocessing as mp\n"
        "a(os.cpu_count())\na(mp.cpu_count())\na(str(os.cpu_count()))\na(os.cpu_count() or 1)\na(8)\na(count())\n"
    )
    sites = [s for s in model.calls if code(model, s.node.func) == "a"]
    assert [model.is_cpu_count(s.node.args[0].value, s.scope, s.index) for s in sites] == [True, True, True, True, False, False]


@pytest.mark.parametrize(
    "loop_source, by_design",
    [
        ("for x in xs:\n    v = ray.get(f.remote(x))\n", False),
        ("for x in xs:\n    v = ray.get(f.remote(x))\n    break\n", True),
        ("for x in xs:\n    if x:\n        v = ray.get(f.remote(x))\n        return v\n    log(x)\n", True),
        ("for x in xs:\n    for y in x:\n        v = ray.get(f.remote(y))\n        break\n", False),
        ("while True:\n    try:\n        v = ray.get(f.remote())\n        break\n    except E:\n        pass\n", True),
        ("while True:\n    v = ray.get(f.remote())\n    use(v)\n", True),
        ("while True:\n    v = ray.get(f.remote(i))\n    i += 1\n    if i > 9:\n        break\n", False),
        ("for n in sizes:\n    t = time.perf_counter()\n    ray.get(f.remote(n))\n    print(time.perf_counter() - t)\n", True),
        ("for n in sizes:\n    ray.get(f.remote(n))\n    time.sleep(1)\n", True),
    ],
)
def test_sequential_by_design(loop_source: str, by_design: bool) -> None:
    model = model_of("import ray\nimport time\ndef main():\n" + "".join("    " + line + "\n" for line in loop_source.splitlines()))
    (get,) = model.calls_to("ray.get")
    loop = get.loop
    while loop is not None and loop.parent is not None:
        loop = loop.parent
    assert loop is not None
    assert sequential_by_design(model, loop, get) is by_design


def test_single_actor_and_repeated_calls() -> None:
    model = model_of(
        "import ray\n@ray.remote\nclass A:\n    def m(self, x):\n        return x\n"
        "a = A.remote()\nactors = [A.remote() for _ in range(3)]\n"
        "for x in xs:\n    ray.get(a.m.remote(x))\n"
        "for i in range(3):\n    ray.get(actors[i].m.remote(1))\n"
        "for _ in range(3):\n    ray.get(a.m.remote(1))\n"
    )
    gets = model.calls_to("ray.get")
    calls = [get.node.args[0].value for get in gets]
    submissions = [model.submission(call) for call in calls]  # type: ignore[arg-type]
    assert all(s is not None for s in submissions)
    single = [single_actor(model, s, get.loop) is not None for s, get in zip(submissions, gets)]  # type: ignore[arg-type]
    assert single == [True, False, True]
    repeated = [repeats_discarded_call(model, get.loop, get, call) for get, call in zip(gets, calls)]  # type: ignore[arg-type]
    assert repeated == [False, False, True]


def test_self_stores_index_writes_through_self_by_attribute() -> None:
    model = model_of(
        "class Worker:\n"
        "    def __init__(self, n):\n"
        "        self.actors = [A() for _ in range(n)]\n"
        "        self.eval = False\n"
        "    def reset(self):\n"
        "        self.actors[0] = A()\n"
        "        other.eval = True\n"
        "        def inner(x):\n"
        "            x.eval = 1\n"
        "    @staticmethod\n"
        "    def make():\n"
        "        pass\n"
    )
    stores = model.self_stores(model.classes[0])
    assert sorted(stores) == ["actors", "eval"]
    assert [model.source_of(s.target) for s in stores["actors"]] == ["self.actors", "self.actors[0]"]
    assert [model.function_info(s.scope.node).node.name.value for s in stores["eval"]] == ["__init__"]  # type: ignore[arg-type, union-attr]


def test_self_assignments_are_known_only_when_every_write_is_a_plain_assignment() -> None:
    model = model_of(
        "class Worker:\n"
        "    def __init__(self, a, b):\n"
        "        self.actors = a\n"
        "        self.table = {}\n"
        "        self.count = 0\n"
        "        self.config = b\n"
        "        self.left, self.right = a, b\n"
        "    def reset(self, c):\n"
        "        self.actors = c\n"
        "        self.table['k'] = 1\n"
        "        self.count += 1\n"
        "        self.config.config = c\n"
    )
    worker = model.classes[0]
    assert [model.source_of(s.value) for s in model.self_assignments(worker, "actors")] == ["a", "c"]  # type: ignore[arg-type]
    assert [name for name in ("table", "count", "config", "left", "missing") if model.self_assignments(worker, name)] == []


def test_a_generator_is_a_function_whose_own_body_yields() -> None:
    model = model_of(
        "def numbers(k):\n    for i in range(k):\n        yield i\n\n"
        "async def stream():\n    yield 1\n\n"
        "def outer():\n    def inner():\n        yield 1\n    return inner\n\n"
        "def plain():\n    return [x for x in range(3)]\n"
    )
    generators = {info.node.name.value: info.is_generator for info in model.functions}
    assert generators == {"numbers": True, "stream": True, "outer": False, "inner": True, "plain": False}
