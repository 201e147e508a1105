"""Project-wide facts (`ray_lint.project`) through the real front-ends: a finding that another module
contradicts (the actor's `num_gpus` set by a worker-group builder, an import of the project's own
package) is dropped by `ray-lint check` (whole tree, one file, standard input, warm cache, fixes) and
by flake8; a lone file keeps today's per-file behaviour. Also the test-code policy, vendored code,
and one finding per problem."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest

from ray_lint.model import SemanticModel
from ray_lint.project import PackageFinder, facts_of, facts_of_calls

# An actor that moves its model to the GPU without asking for one: RAY040 on line 3 (`@ray.remote`).
WORKER = (
    "import ray\n\n"
    "@ray.remote\n"
    "class Worker:\n"
    "    def __init__(self):\n"
    "        self.model = make_model().cuda()\n"
)
# Another module that starts it with a GPU, as worker-group builders do.
GROUP = "import ray\nfrom workers import Worker\n\ndef start(n):\n    return [Worker.options(num_gpus=1).remote() for _ in range(n)]\n"
UNRELATED = "import ray\nfrom workers import Worker\n\ndef start(n):\n    return [Worker.remote() for _ in range(n)]\n"


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")


def codes(proc: subprocess.CompletedProcess[str]) -> list[tuple[str, str, int]]:
    assert proc.returncode in (0, 1), proc.stderr
    return sorted((Path(d["filename"]).as_posix(), d["code"], d["location"]["row"]) for d in json.loads(proc.stdout))


def check(run, cwd: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run(["check", "--jobs", "1", "--output-format", "json", *args], cwd, stdin=stdin)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path, {"pyproject.toml": "[project]\nname = 'demo'\n", "workers.py": WORKER, "group.py": GROUP})
    return tmp_path


# ---------------------------------------------------------------------------- the facts


def test_facts_name_what_each_call_gives():
    text = (
        "Worker.options(num_gpus=1, name='w')\n"
        "ray.remote(num_cpus=2)(Reader)\n"
        "make_group(Learner, num_gpus_per_worker=1)\n"
        "Other.options(**actor_options)\n"
        "lowercase_builder(helper, use_gpu=True)\n"
    )
    assert facts_of(text) == {
        "gives:num_gpus:Worker",
        "gives:num_cpus:Reader",
        "gives:num_gpus:Learner",
        "gives:*:Other",
    }
    actors = "import ray\n@ray.remote\nclass A:\n    async def f(self):\n        pass\n@ray.remote(max_concurrency=4)\nclass B:\n    pass\n"
    assert facts_of(actors) == {"actor:async:A", "actor:threaded:B"}
    assert facts_of("import ray\n@ray.remote\nclass C:\n    def f(self):\n        pass\n") == {"actor:sync:C"}
    assert set(SemanticModel(cst.parse_module(actors)).actor_facts()) == facts_of(actors)
    # the engine reads the same facts from its semantic model
    assert facts_of_calls(SemanticModel(cst.parse_module(text)).call_shapes()) == facts_of(text)
    assert facts_of("import ray\nx = 1\n") == frozenset()  # no resource keyword: not parsed
    assert facts_of("Worker.options(num_gpus=1\n") == frozenset()  # a syntax error gives nothing


def test_packages_are_the_projects_own_top_level_names(tmp_path):
    write(tmp_path, {"pyproject.toml": "", "pkg/__init__.py": "", "pkg/sub/__init__.py": "", "pkg/sub/mod.py": "",
                     "script.py": "", "tools/helper.py": "", "src/lib/__init__.py": "", "src/lib/x.py": ""})
    finder = PackageFinder()
    assert finder.facts_of(tmp_path / "pkg" / "sub" / "mod.py") == {"package:pkg"}
    assert finder.facts_of(tmp_path / "script.py") == {"package:script"}
    assert finder.facts_of(tmp_path / "tools" / "helper.py") == frozenset()  # a loose script directory
    assert finder.facts_of(tmp_path / "src" / "lib" / "x.py") == {"package:lib"}


# ---------------------------------------------------------------------------- ray-lint check


def test_options_given_in_another_module_silence_the_finding(run, project):
    assert codes(check(run, project, "--select", "RAY040", ".")) == []
    assert codes(check(run, project, "--select", "RAY040", "workers.py")) == []  # the rest of the project is read
    (project / "group.py").write_text(UNRELATED, encoding="utf-8")
    assert codes(check(run, project, "--select", "RAY040", ".")) == [("workers.py", "RAY040", 3)]


def test_a_warm_cache_gives_the_same_answer(run, project):
    cold = check(run, project, "--select", "RAY040", "--cache-dir", "cache", ".")
    warm = check(run, project, "--select", "RAY040", "--cache-dir", "cache", ".")
    assert codes(cold) == codes(warm) == []
    (project / "group.py").write_text(UNRELATED, encoding="utf-8")  # only the changed file is linted again
    assert codes(check(run, project, "--select", "RAY040", "--cache-dir", "cache", ".")) == [("workers.py", "RAY040", 3)]


def test_standard_input_reads_the_project_of_its_file_name(run, project):
    named = check(run, project, "--select", "RAY040", "-", "--stdin-filename", "workers.py", stdin=WORKER)
    assert codes(named) == []
    lone = check(run, project, "--select", "RAY040", "-", stdin=WORKER)
    assert codes(lone) == [("-", "RAY040", 3)]


def test_fixes_wait_for_the_project_facts(run, project):
    proc = run(["check", "--jobs", "1", "--select", "RAY040", "--fix", "--unsafe-fixes", "."], project)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (project / "workers.py").read_text(encoding="utf-8") == WORKER  # num_gpus is set elsewhere: no fix
    (project / "group.py").write_text(UNRELATED, encoding="utf-8")
    proc = run(["check", "--jobs", "1", "--select", "RAY040", "--fix", "--unsafe-fixes", "."], project)
    assert "@ray.remote(num_gpus=1)" in (project / "workers.py").read_text(encoding="utf-8"), proc.stdout + proc.stderr


def test_an_import_of_the_projects_own_package_is_not_reported(run, tmp_path):
    driver = (
        "import sys\nimport ray\n\nray.init()\nsys.path.insert(0, '/opt/code')\nimport {module}\n\n"
        "@ray.remote\ndef work(x):\n    return {module}.run(x)\n\nray.get(work.remote(1))\n"
    )
    write(tmp_path, {"pyproject.toml": "", "mypkg/__init__.py": "def run(x):\n    return x\n",
                     "own.py": driver.format(module="mypkg"), "other.py": driver.format(module="otherlib")})
    assert codes(check(run, tmp_path, "--select", "RAY062", ".")) == [("other.py", "RAY062", 5)]


FETCHER = "import ray\n\n@ray.remote\nclass Fetcher:\n    {kind}def fetch(self, url):\n        return url\n"
DRIVER = "import ray\nfrom fetchers import Fetcher\n\nf = Fetcher.remote()\nfor url in urls:\n    print(ray.get(f.fetch.remote(url)))\n"


def test_a_loop_of_gets_on_an_imported_async_actor(run, tmp_path):
    """One actor runs its calls one at a time, so a get per call costs nothing more, unless its class,
    in another module, is async: then the loop serializes calls the actor would run together."""
    write(tmp_path, {"pyproject.toml": "", "fetchers.py": FETCHER.format(kind="async "), "driver.py": DRIVER})
    assert codes(check(run, tmp_path, "--select", "RAY001", ".")) == [("driver.py", "RAY001", 6)]
    assert codes(check(run, tmp_path, "--select", "RAY001", "driver.py")) == [("driver.py", "RAY001", 6)]
    assert codes(check(run, tmp_path, "--select", "RAY001", "-", stdin=DRIVER)) == []  # a lone file: unknown class
    write(tmp_path, {"other/fetchers.py": FETCHER.format(kind="")})  # a synchronous class of the same name
    assert codes(check(run, tmp_path, "--select", "RAY001", ".")) == []
    write(tmp_path, {"other/fetchers.py": "", "fetchers.py": FETCHER.format(kind="")})
    assert codes(check(run, tmp_path, "--select", "RAY001", ".")) == []


# ---------------------------------------------------------------------------- flake8


def test_flake8_reads_the_project_when_a_finding_depends_on_it(run, project):
    proc = run(["--select", "RAY040", "workers.py"], project, program=(sys.executable, "-m", "flake8"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (project / "group.py").write_text(UNRELATED, encoding="utf-8")
    proc = run(["--select", "RAY040", "workers.py"], project, program=(sys.executable, "-m", "flake8"))
    assert "workers.py:3:1: RAY040" in proc.stdout, proc.stdout + proc.stderr
    write(project, {"fetchers.py": FETCHER.format(kind="async "), "driver.py": DRIVER})
    proc = run(["--select", "RAY001", "driver.py"], project, program=(sys.executable, "-m", "flake8"))
    assert "driver.py:6:11: RAY001" in proc.stdout, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- test code, vendored code


GET_IN_LOOP = "import ray\nresults = [ray.get(f.remote(x)) for x in xs]\n"
INIT_TWICE = "import ray\nray.init()\nray.init()\n"


def test_performance_rules_skip_test_files_and_bugs_do_not(run, tmp_path):
    write(tmp_path, {"tests/helpers.py": GET_IN_LOOP, "test_a.py": GET_IN_LOOP, "pkg/a_test.py": GET_IN_LOOP,
                     "conftest.py": GET_IN_LOOP, "pkg/code.py": GET_IN_LOOP, "tests/test_init.py": INIT_TWICE})
    assert codes(check(run, tmp_path, ".")) == [("pkg/code.py", "RAY001", 2), ("tests/test_init.py", "RAY090", 3)]
    everything = check(run, tmp_path, "--no-cache", ".")
    write(tmp_path, {"pyproject.toml": "[tool.ray-lint]\nall-rules-in-tests = true\n"})
    assert len(codes(check(run, tmp_path, "--no-cache", "."))) == len(codes(everything)) + 4
    write(tmp_path, {"pyproject.toml": '[tool.ray-lint]\ntest-files = ["pkg/"]\n'})
    assert codes(check(run, tmp_path, "--no-cache", "pkg", "test_a.py")) == [("test_a.py", "RAY001", 2)]


def test_vendored_directories_are_excluded(run, tmp_path):
    write(tmp_path, {name + "/lib.py": GET_IN_LOOP for name in ("third_party", "vendor", "vendored", "pkg/_vendor")})
    write(tmp_path, {"mine.py": GET_IN_LOOP})
    assert codes(check(run, tmp_path, ".")) == [("mine.py", "RAY001", 2)]


def test_one_finding_per_problem(run, tmp_path):
    # a get in a loop inside a coroutine: RAY006 (await it) says more than RAY001 (batch it)
    write(tmp_path, {"serve.py": "import ray\n\nasync def handle(xs):\n    return [ray.get(f.remote(x)) for x in xs]\n"})
    assert codes(check(run, tmp_path, "--select", "RAY001,RAY006", ".")) == [("serve.py", "RAY006", 4)]


# ---------------------------------------------------------------------------- effects one call away

WRAPPERS = (
    "import ray\n\n"
    "@ray.remote\n"
    "class EnvActor:\n"
    "    def step(self, action):\n"
    "        return action\n\n"
    "    def get_rank(self):\n"
    "        return 0\n\n"
    "class RayWorker:\n"
    "    def __init__(self, seed):\n"
    "        self.actor = EnvActor.remote()\n\n"
    "    def step(self, action):\n"
    "        return ray.get(self.actor.step.remote(action))\n\n"
    "    def rank(self):\n"
    "        return ray.get(self.actor.get_rank.remote())\n\n"
    "def to_gpu(model):\n"
    "    return model.cuda()\n"
)
CALLERS = (
    "import ray\n"
    "from envs.wrappers import RayWorker, to_gpu\n\n"
    "class VecEnv:\n"
    "    def __init__(self, n):\n"
    "        self.workers = [RayWorker(i) for i in range(n)]\n\n"
    "    def step(self, actions):\n"
    "        return [w.step(a) for w, a in zip(self.workers, actions)]\n\n"  # line 9: each call waits
    "    def ranks(self):\n"
    "        return [w.rank() for w in self.workers]\n\n"  # a small fact: not reported
    "@ray.remote\n"  # line 14: a task that uses the GPU through `to_gpu`
    "def train(model):\n"
    "    return to_gpu(model)\n\n"
    "@ray.remote\n"
    "class Server:\n"
    "    def __init__(self):\n"
    "        self.worker = RayWorker(0)\n\n"
    "    async def handle(self, action):\n"
    "        return self.worker.step(action)\n"  # line 24: blocks the async actor's event loop
    "\n"
    "server = Server.remote()\n"
)


def test_effects_one_call_away_in_another_module(run, tmp_path):
    write(tmp_path, {"pyproject.toml": "", "envs/__init__.py": "", "envs/wrappers.py": WRAPPERS, "envs/callers.py": CALLERS})
    found = codes(check(run, tmp_path, "."))
    assert found == [("envs/callers.py", "RAY001", 9), ("envs/callers.py", "RAY006", 24), ("envs/callers.py", "RAY040", 14)]
    messages = [d["message"] for d in json.loads(check(run, tmp_path, ".").stdout)]
    assert any("`RayWorker.step`" in message for message in messages)
    assert any("`envs.wrappers.to_gpu`" in message for message in messages)


def test_effects_one_call_away_need_the_other_module(run, tmp_path):
    """Without the module that waits (or uses the GPU), nothing says the call does: no finding."""
    write(tmp_path, {"pyproject.toml": "", "envs/__init__.py": "", "envs/callers.py": CALLERS})
    assert codes(check(run, tmp_path, ".")) == []


def test_one_file_summarises_the_other_modules_it_needs(run, tmp_path):
    """Checking one module (or standard input) summarises, with ray-lint's own model, the other modules
    that may define the functions its findings need; a helper module without Ray tokens included."""
    write(tmp_path, {"pyproject.toml": "", "envs/__init__.py": "", "envs/wrappers.py": WRAPPERS, "envs/callers.py": CALLERS})
    expected = [("envs/callers.py", "RAY001", 9), ("envs/callers.py", "RAY006", 24), ("envs/callers.py", "RAY040", 14)]
    assert codes(check(run, tmp_path, "envs/callers.py")) == expected
    assert codes(check(run, tmp_path, "envs/callers.py")) == expected  # from the cache
    stdin = check(run, tmp_path, "--stdin-filename", "envs/callers.py", "-", stdin=CALLERS)
    assert [code for _, code, _ in codes(stdin)] == ["RAY001", "RAY006", "RAY040"]
    write(tmp_path, {"envs/gpu.py": "def to_gpu(model):\n    return model.cuda()\n"})  # no Ray token at all
    write(tmp_path, {"envs/wrappers.py": WRAPPERS.replace("def to_gpu(model):\n    return model.cuda()\n", "")})
    write(tmp_path, {"envs/callers.py": CALLERS.replace("from envs.wrappers import RayWorker, to_gpu", "from envs.wrappers import RayWorker\nfrom envs.gpu import to_gpu")})
    assert ("envs/callers.py", "RAY040", 15) in codes(check(run, tmp_path, "."))


def test_flake8_summarises_the_modules_a_finding_needs(run, tmp_path):
    write(tmp_path, {"pyproject.toml": "", "envs/__init__.py": "", "envs/wrappers.py": WRAPPERS, "envs/callers.py": CALLERS})
    proc = run(["--select", "RAY", "envs/callers.py"], tmp_path, program=(sys.executable, "-m", "flake8"))
    found = sorted(line.split(" ")[1] for line in proc.stdout.splitlines())
    assert found == ["RAY001", "RAY006", "RAY040"], proc.stdout + proc.stderr


def test_a_certain_gpu_use_is_not_hidden_behind_an_imported_helper(run, tmp_path):
    """An imported helper that uses no GPU, called before a `.cuda()` in the same task, does not make the
    finding depend on the helper; with two imported helpers, the one that uses the GPU decides."""
    write(tmp_path, {
        "pyproject.toml": "",
        "pkg/__init__.py": "",
        "pkg/prep.py": "def normalize(x):\n    return x\n\ndef to_gpu(m):\n    return m.cuda()\n",
        "pkg/task.py": (
            "import ray\nfrom pkg.prep import normalize, to_gpu\n\n"
            "@ray.remote\ndef direct(m, x):\n    x = normalize(x)\n    return m.cuda()(x)\n\n"
            "@ray.remote\ndef helped(m, x):\n    x = normalize(x)\n    return to_gpu(m)(x)\n\n"
            "@ray.remote\ndef plain(x):\n    return normalize(x)\n"
        ),
    })
    assert codes(check(run, tmp_path, "--select", "RAY040", ".")) == [("pkg/task.py", "RAY040", 4), ("pkg/task.py", "RAY040", 9)]


PROCESSOR = (
    "import multiprocessing\n\n"
    "def process_file(path, workers=1):\n"
    "    pages = read(path)\n"
    "    if workers > 1:\n"
    "        return _parallel(pages, workers)\n"
    "    return [clean(p) for p in pages]\n\n"
    "def _parallel(pages, workers):\n"
    "    procs = [multiprocessing.Process(target=clean, args=(p,)) for p in pages[:workers]]\n"
    "    return procs\n\n"
    "def process_spawned(path, workers=1):\n"
    "    with multiprocessing.get_context('spawn').Pool(workers) as pool:\n"
    "        return pool.map(clean, read(path))\n"
)
FORK_CALLERS = (
    "import ray\n"
    "from pipeline import process_file, process_spawned\n\n"
    "@ray.remote\n"
    "def chunk(path, workers):\n"
    "    pages = process_file(path, workers=workers)\n"  # line 6: forks two calls away, in another module
    "    return pages + process_spawned(path, workers)\n"  # a spawn context: not reported
)


def test_a_fork_in_another_modules_helper(run, tmp_path):
    """A task that calls a package's helper which forks (re-exported by the package's __init__, behind a
    condition and a second helper): RAY064 at the call, naming the helper; nothing without that module."""
    write(tmp_path, {"pyproject.toml": "", "pipeline/__init__.py": "from .processor import process_file, process_spawned\n",
                     "pipeline/processor.py": PROCESSOR, "jobs/run.py": FORK_CALLERS})
    proc = check(run, tmp_path, "--select", "RAY064", ".")
    assert codes(proc) == [("jobs/run.py", "RAY064", 6)]
    assert "`pipeline.process_file`" in json.loads(proc.stdout)[0]["message"]
    assert codes(check(run, tmp_path, "--select", "RAY064", "jobs/run.py")) == [("jobs/run.py", "RAY064", 6)]
    (tmp_path / "pipeline" / "processor.py").unlink()
    assert codes(check(run, tmp_path, "--select", "RAY064", ".")) == []
