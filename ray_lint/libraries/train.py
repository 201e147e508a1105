"""Ray Train: the functions handed to trainers as `train_loop_per_worker`, the calls and torch DataLoaders
in them, and rank guards; and a 2-worker TorchTrainer script for experiments."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from functools import cached_property

import libcst as cst

from ray_lint.experiment import JointPart, Variant, script
from ray_lint.libraries import defined_function_or_class, keyword_value
from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    CallSite,
    FunctionInfo,
    Loop,
    Scope,
    iter_subtree,
    literal_number,
    literal_string,
    names_read,
    scope_within,
    target_names,
)

TRAINERS = frozenset({
    "ray.train.torch.TorchTrainer",
    "ray.train.tensorflow.TensorflowTrainer",
    "ray.train.data_parallel_trainer.DataParallelTrainer",
    "ray.train.lightning.LightningTrainer",
    "ray.train.v2.torch.TorchTrainer",
    "ray.train.v2.api.data_parallel_trainer.DataParallelTrainer",
})
# Ray 1.x's trainer: `trainer = Trainer(backend="torch", num_workers=4)`, then `trainer.run(train_func, config)`.
LEGACY_TRAINERS = frozenset({"ray.train.Trainer", "ray.train.trainer.Trainer"})
RANK_CALLS = frozenset({
    "ray.train.get_context", "ray.train.torch.get_world_rank", "ray.train.get_world_rank",
    "ray.train.get_local_rank", "torch.distributed.get_rank",
})
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
PREPARE_LOADER = frozenset({"ray.train.torch.prepare_data_loader", "ray.train.torch.train_loop_utils.prepare_data_loader"})
# Other libraries' calls (by their last name, whatever the receiver) that take a loader over and shard it across the
# workers themselves: Accelerate's `accelerator.prepare(model, optimizer, loader)` and `prepare_data_loader`,
# Lightning Fabric's `fabric.setup_dataloaders(loader)`.
SHARDING_PREPARERS = frozenset({"prepare", "prepare_data_loader", "setup_dataloaders"})
RANK_WORDS = ("rank",)  # a test that reads a name or attribute with one of these words is a rank guard


@dataclass(eq=False, repr=False)
class TrainLoop:
    """A function handed to a trainer as `train_loop_per_worker`, with what the trainer call says."""

    function: FunctionInfo
    trainer: CallSite
    num_workers: int | None  # from a literal `ScalingConfig(num_workers=N)` (1 when it names none); None when unknown
    use_gpu: bool | None  # None when unknown
    helpers: list[FunctionInfo] = field(default_factory=list)  # module functions it calls by name


@dataclass(eq=False, repr=False)
class TorchLoader:
    """A torch `DataLoader` that a training loop builds and iterates: how it is built and where it is read."""

    built: CallSite  # the `DataLoader(...)` call: in the loop's own body, or in a helper that returns it
    got: CallSite  # where the loop's body gets it: `built` itself, or the call of the helper that returns it
    names: frozenset[str]  # the loop's names for it, the `prepare_data_loader(...)` result's included
    prepared: bool  # handed to `ray.train.torch.prepare_data_loader`
    # Handed to another library's preparation, which shards it (`accelerator.prepare`); for a loader kept in a
    # dict, any preparation in the loop, since which entries a preparation is given is not followed.
    taken_over: bool
    sampler: cst.BaseExpression | None  # `sampler=` or `batch_sampler=`, as written
    # Where the loop reads it: the iterable of a `for` over it, or a call of one of its helpers given it;
    # with the loop that holds that place (the epoch loop), None when it is read once.
    reads: list[tuple[cst.CSTNode, Loop | None]] = field(default_factory=list)


class TrainFacts:
    """The training loops that the module hands to Ray Train's trainers."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model

    @cached_property
    def loops(self) -> list[TrainLoop]:
        found: dict[int, TrainLoop] = {}
        runs = [(site, self._scaling(site)) for name in TRAINERS for site in self.model.calls_to(name)]
        for name in LEGACY_TRAINERS:
            runs += [(run, _workers_and_gpu(made.node)) for made in self.model.calls_to(name) for run in self._legacy_runs(made)]
        for site, (num_workers, use_gpu) in runs:
            function = self._loop_function(site)
            if function is None:
                continue
            loop = found.get(id(function.node))
            if loop is None:
                found[id(function.node)] = TrainLoop(function, site, num_workers, use_gpu, self._helpers(function))
            else:  # handed to several trainers: only what all of them agree on is known
                loop.num_workers = loop.num_workers if loop.num_workers == num_workers else None
                loop.use_gpu = loop.use_gpu if loop.use_gpu == use_gpu else None
        return list(found.values())

    def loop_of_scope(self, scope: Scope) -> TrainLoop | None:
        """The training loop whose body (or a helper it calls, or a function nested in it) holds `scope`."""
        for loop in self.loops:
            for function in (loop.function, *loop.helpers):
                if scope_within(scope, function.scope):
                    return loop
        return None

    def calls_in(self, loop: TrainLoop) -> list[CallSite]:
        """The calls every worker runs: in the loop's body, the functions nested in it, and its helpers."""
        functions = (loop.function, *loop.helpers)
        return [site for site in self.model.calls if any(scope_within(site.scope, f.scope) for f in functions)]

    def torch_loaders(self, loop: TrainLoop) -> list[TorchLoader]:
        """The `DataLoader`s the loop's own body builds, or gets from a helper that returns one
        (`loader = build_loader(batch_size)`), bound to a name or kept in a dict (`loaders["train"] =
        DataLoader(...)`, `{"train": DataLoader(...)}`), with the names `prepare_data_loader` gives them."""
        model, scope = self.model, loop.function.scope
        calls = [site for site in self.calls_in(loop) if scope_within(site.scope, scope)]
        loaders = []
        for site in calls:
            built = site if model.call_name(site) in DATA_LOADERS else self._loader_returned(loop, site)
            if built is None:
                continue
            names, prepared, taken_over = set(_assigned_names(site.statement, site.node)), False, False
            entry = None if names else _dict_entry(site.statement, site.node)
            if entry is not None:
                names = {entry[0]}
                taken_over = any(_prepares(model, other) for other in self.calls_in(loop))
            for other in calls:  # `loader = prepare_data_loader(loader)`, or of the call itself
                handed = [
                    position for position, arg in enumerate(other.node.args)
                    if arg.value is site.node or _names_one_of(arg.value, names)
                ]
                if not handed:
                    continue
                if model.call_name(other) in PREPARE_LOADER and handed[0] == 0:
                    prepared = True
                    names |= _assigned_names(other.statement, other.node)
                elif isinstance(other.node.func, cst.Attribute) and other.node.func.attr.value in SHARDING_PREPARERS:
                    taken_over = True
            if names:
                sampler = keyword_value(built.node, "sampler") or keyword_value(built.node, "batch_sampler")
                reads = self._reads(loop, names, entry[1] if entry is not None else None)
                loaders.append(TorchLoader(built, site, frozenset(names), prepared, taken_over, sampler, reads))
        return loaders

    def _loader_returned(self, loop: TrainLoop, site: CallSite) -> CallSite | None:
        """The `DataLoader(...)` call that a helper of the loop, called at `site`, returns from every
        `return` of its body: `return DataLoader(...)`, or `loader = DataLoader(...)` then `return loader`."""
        called = defined_function_or_class(self.model, site.node.func, site.scope, site.index)
        if not isinstance(called, FunctionInfo) or not any(called is helper for helper in loop.helpers):
            return None
        returned: dict[int, cst.Call] = {}
        for node in iter_subtree(called.node.body, into_functions=False):
            if not isinstance(node, cst.Return):
                continue
            value = node.value
            if isinstance(value, cst.Name):
                binding = self.model.sole_assignment(value.value, called.scope, AFTER_ALL)
                value = binding.value if binding is not None and binding.scope is called.scope else None
            if not isinstance(value, cst.Call):
                return None
            returned[id(value)] = value
        built = self.model.call_site(next(iter(returned.values()))) if len(returned) == 1 else None
        return built if built is not None and self.model.call_name(built) in DATA_LOADERS else None

    def _reads(self, loop: TrainLoop, names: set[str], key: str | None = None) -> list[tuple[cst.CSTNode, Loop | None]]:
        """`for batch in loader:` (or `enumerate(loader)`, `tqdm(loader)`) in the loop's body, and calls of
        its helpers that are given the loader. A loader kept in a dict under `key` is read by `loaders[phase]`
        or `loaders["train"]`, not by `loaders["val"]`."""
        reads: list[tuple[cst.CSTNode, Loop | None]] = []
        for found in self.model.loops:
            if not (isinstance(found.node, cst.For) and scope_within(found.scope, loop.function.scope)):
                continue
            if names & names_read(found.node.iter) and (key is None or _may_read_key(found.node.iter, names, key)):
                reads.append((found.node.iter, found.parent))
        helpers = {id(helper.node) for helper in loop.helpers}
        for site in self.calls_in(loop):
            if not scope_within(site.scope, loop.function.scope) or not any(names & names_read(arg.value) for arg in site.node.args):
                continue
            called = defined_function_or_class(self.model, site.node.func, site.scope, site.index)
            if called is not None and id(called.node) in helpers:
                reads.append((site.node, site.loop))
        return reads

    def _loop_function(self, site: CallSite) -> FunctionInfo | None:
        call = site.node
        value = None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value in ("train_loop_per_worker", "train_func"):
                value = arg.value
        if value is None and call.args and call.args[0].keyword is None and not call.args[0].star:
            value = call.args[0].value
        if value is None:
            return None
        found = defined_function_or_class(self.model, value, site.scope, site.index)
        return found if isinstance(found, FunctionInfo) else None

    def _legacy_runs(self, made: CallSite) -> list[CallSite]:
        """The `trainer.run(...)` calls on the name a Ray 1.x `Trainer(...)` is assigned to, in its scope."""
        statement = made.statement
        if not isinstance(statement, cst.Assign) or statement.value is not made.node or len(statement.targets) != 1:
            return []
        target = statement.targets[0].target
        if not isinstance(target, cst.Name):
            return []
        runs = []
        for site in self.model.calls_by_tail.get("run", ()):
            func = site.node.func
            if site.scope is made.scope and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == target.value:
                binding = self.model.reaching_binding(target.value, site.scope, site.index)
                if binding is not None and binding.value is made.node:
                    runs.append(site)
        return runs

    def _scaling(self, site: CallSite) -> tuple[int | None, bool | None]:
        """`num_workers` and `use_gpu` of a literal `ScalingConfig(...)`, given in the call or named."""
        config, scope, at = keyword_value(site.node, "scaling_config"), site.scope, site.index
        if isinstance(config, cst.Name):
            binding = self.model.sole_assignment(config.value, site.scope, site.index)
            config, scope, at = (binding.value, binding.scope, binding.index) if binding is not None else (None, scope, at)
        if not isinstance(config, cst.Call) or not (self.model.qualified_name(config.func, scope, at) or "").endswith("ScalingConfig"):
            return None, None  # absent (Tune may pass one in `param_space`) or built elsewhere: unknown
        return _workers_and_gpu(config)

    def _helpers(self, function: FunctionInfo) -> list[FunctionInfo]:
        """Module-level functions the loop calls by name: where model building often lives."""
        helpers = []
        for site in self.model.calls:
            if not scope_within(site.scope, function.scope) or not isinstance(site.node.func, cst.Name):
                continue
            binding = self.model.reaching_binding(site.node.func.value, site.scope, site.index)
            if binding is not None and binding.kind == "def" and binding.scope is self.model.module_scope:
                info = self.model.function_info(binding.node)  # type: ignore[arg-type]
                if info is not None and info is not function and info not in helpers:
                    helpers.append(info)
        return helpers


def _workers_and_gpu(call: cst.Call) -> tuple[int | None, bool | None]:
    """The literal `num_workers` and `use_gpu` of a `ScalingConfig(...)` or a Ray 1.x `Trainer(...)`: both
    default to one worker on CPUs; None where a value is not literal."""
    workers_given = keyword_value(call, "num_workers")
    workers = 1 if workers_given is None else literal_number(workers_given)
    gpu = keyword_value(call, "use_gpu")
    use_gpu: bool | None = False if gpu is None else {"True": True, "False": False}.get(
        gpu.value if isinstance(gpu, cst.Name) else "", None
    )
    return (int(workers) if workers is not None else None), use_gpu


def _assigned_names(statement: cst.CSTNode | None, value: cst.CSTNode) -> set[str]:
    """The names `name = value` binds, when `value` is the whole right-hand side."""
    if isinstance(statement, cst.SimpleStatementLine):
        for small in statement.body:
            if isinstance(small, cst.Assign) and small.value is value:
                return {name for target in small.targets for name in target_names(target.target)}
    if isinstance(statement, cst.Assign) and statement.value is value:
        return {name for target in statement.targets for name in target_names(target.target)}
    return set()


def _dict_entry(statement: cst.CSTNode | None, value: cst.CSTNode) -> tuple[str, str | None] | None:
    """The dict's name and the key (None unless a literal string) when `value` is stored as an entry of a
    dict bound to a name: `loaders["train"] = value`, `loaders = {"train": value, ...}`, `loaders = {k:
    value for k in ...}`."""
    small = statement.body[0] if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 else statement
    if not isinstance(small, cst.Assign) or len(small.targets) != 1:
        return None
    target = small.targets[0].target
    if small.value is value and isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
        return target.value.value, _literal_key(target)
    if not isinstance(target, cst.Name):
        return None
    if isinstance(small.value, cst.DictComp) and small.value.value is value:
        return target.value, None
    if isinstance(small.value, cst.Dict):
        for element in small.value.elements:
            if isinstance(element, cst.DictElement) and element.value is value:
                return target.value, literal_string(element.key)
    return None


def _names_one_of(expr: cst.BaseExpression, names: set[str]) -> bool:
    """`loader`, or an entry of a dict that holds it (`loaders["train"]`), for a name of `names`."""
    if isinstance(expr, cst.Subscript):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in names


def _may_read_key(iterable: cst.BaseExpression, names: set[str], key: str) -> bool:
    """Whether `iterable` may read the entry `key` of the dicts `names`: it reads one without a subscript, or
    through a subscript whose key is not another literal string."""
    subscripts = [
        node for node in iter_subtree(iterable)
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value in names
    ]
    return not subscripts or any(_literal_key(node) in (None, key) for node in subscripts)


def _literal_key(subscript: cst.Subscript) -> str | None:
    """The key of `d["train"]`; None for any other subscript (`d[phase]`, `d[a:b]`)."""
    index = subscript.slice[0].slice if len(subscript.slice) == 1 else None
    return literal_string(index.value) if isinstance(index, cst.Index) else None


def _prepares(model: SemanticModel, site: CallSite) -> bool:
    """A call of `prepare_data_loader`, or of another library's preparation that shards loaders."""
    func = site.node.func
    return model.call_name(site) in PREPARE_LOADER or (isinstance(func, cst.Attribute) and func.attr.value in SHARDING_PREPARERS)


def rank_guard(model: SemanticModel, function: FunctionInfo, node: cst.CSTNode) -> cst.If | None:
    """The `if` around `node` (within `function`) whose test reads a rank: `if rank == 0:`,
    `if ray.train.get_context().get_world_rank() == 0:`, `if world_rank != 0: ...` and its `else`."""
    path = model.path_within(function.node.body, node)
    if path is None:
        return None
    for parent in reversed(path[:-1]):
        if isinstance(parent, cst.If) and reads_rank(parent.test):
            return parent
    return None


def reads_rank(test: cst.BaseExpression) -> bool:
    if any(word in name.lower() for name in names_read(test) for word in RANK_WORDS):
        return True
    for node in iter_subtree(test):
        if isinstance(node, cst.Attribute) and "rank" in node.attr.value.lower():
            return True
    return False


# What a Ray Train model needs at least: two workers' start, a gloo group and a fit, on 2 CPUs (about 15 s
# on a quiet machine), and what its forms run.
TRAIN_RUN_TIMEOUT_S = 180.0
TORCH_TRAINER_LIBRARIES = ("train.torch",)  # what a model imports: `script(..., TORCH_TRAINER_LIBRARIES)`
# Ray Train's controller looks at its workers every 2 s: `fit()` returns up to 2 s after they finish. A model
# asks for every half second; the driver hands the setting to the controller.
QUICK_CONTROLLER = 'os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.5")\n'
ONE_TRAIN_RUN = "both forms, one after the other, in one Ray Train run"  # a joint model's label (`Plan.joint`)
# A program for experiments (text; nothing here runs; see `torch_trainer_part`): each part defines
# `flagged_form_{i}`, `fixed_form_{i}` and `evidence_of_{i}(kept)`. Ray Train v2 returns no per-worker
# values, so `keep(value)` hands them back through files, one folder per form.
_TORCH_TRAINER_PROGRAM = QUICK_CONTROLLER + """\
import json
import tempfile

import torch

KEPT = tempfile.mkdtemp()

def keep(value):
    rank = ray.train.get_context().get_world_rank()
    with open(os.path.join(KEPT, f"{{rank}}.json"), "w") as handle:
        json.dump(value, handle)

{parts}

FORMS = [{forms}]

def train_func():
    rank = ray.train.get_context().get_world_rank()
    for folder, step in FORMS:
        step()
        os.makedirs(os.path.join(KEPT, folder), exist_ok=True)
        os.replace(os.path.join(KEPT, f"{{rank}}.json"), os.path.join(KEPT, folder, f"{{rank}}.json"))

train.torch.TorchTrainer(
    train_func,
    scaling_config=train.ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker={{"CPU": 0.5}}),
    run_config=train.RunConfig(storage_path=tempfile.mkdtemp()),
).fit()

def kept_in(folder):
    kept = {{}}
    for name in os.listdir(os.path.join(KEPT, folder)):
        with open(os.path.join(KEPT, folder, name)) as handle:
            kept[int(name.split(".")[0])] = json.load(handle)
    return kept

def forms_of(index, evidence_of):
    return {{"a": evidence_of(kept_in(f"{{index}}a")), "b": evidence_of(kept_in(f"{{index}}b"))}}

{evidence}
"""
_TORCH_TRAINER_PART = """\
{functions}

def evidence_of_{index}(kept):
{compare}
    return __ray_lint_evidence__
"""


def torch_trainer_part(step: str, flagged: str, fixed: str, compare: str) -> JointPart:
    """Both forms of a Ray Train model, for one program (`Plan.part`): a 2-worker CPU `TorchTrainer` (gloo) whose
    workers run the flagged form, then the fixed one, in one `fit()`, and so for every model that shares it. One
    start of Ray Train (its controller, workers and process group, most of the 15 s) serves them all. `step`
    defines `def {name}():`, with `{form}` for the line the forms differ by, and calls `keep(value)`; `compare`
    reads `kept`, that form's values by rank, and sets `__ray_lint_evidence__`."""
    functions = step.format(name="flagged_form_{index}", form=flagged) + "\n" + step.format(name="fixed_form_{index}", form=fixed)
    indented = textwrap.indent(textwrap.dedent(compare).strip(), "    ")
    return JointPart(_TORCH_TRAINER_PART.replace("{functions}", functions.strip()).replace("{compare}", indented), torch_trainer_program, "one Ray Train run")


def torch_trainer_program(parts: tuple[str, ...]) -> Variant:
    """The one program for `parts` (`torch_trainer_part`'s texts), each part's forms in turn."""
    texts = "\n\n".join(part.replace("{index}", str(index)) for index, part in enumerate(parts))
    forms = ", ".join(f'("{index}{side}", {name}_form_{index})' for index in range(len(parts)) for side, name in (("a", "flagged"), ("b", "fixed")))
    each = [f"forms_of({index}, evidence_of_{index})" for index in range(len(parts))]
    evidence = each[0] if len(parts) == 1 else "{\"parts\": [" + ", ".join(each) + "]}"
    source = _TORCH_TRAINER_PROGRAM.format(parts=texts, forms=forms, evidence=f"__ray_lint_evidence__ = {evidence}")
    label = ONE_TRAIN_RUN if len(parts) == 1 else f"{len(parts)} findings' models, both forms of each, in one Ray Train run"
    return Variant(label, script(source, TORCH_TRAINER_LIBRARIES))
