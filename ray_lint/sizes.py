"""How big an object is, where the code says so: constant-folded allocations with literal shapes.

The "large object" rules must never fire on an object of unknown size, so this folds only what is
certain: numpy and torch allocators with literal shapes and dtypes, the torchvision datasets that
load a whole split into memory (`datasets.FashionMNIST(root, train=True)`, about 48 MB), `np.arange`
and `np.linspace` of literal lengths, `bytes(n)`, `bytearray(n)`, `b"x" * n`, `"x" * n`, `[0] * n`, copies of those
(`x.copy()`, `np.zeros_like(x)`), comprehensions of those over literal counts, names bound to them,
and values whose line says `# ray-lint: large`. A size is what Ray serializes: an array's
buffer, or a lower bound of a list's pickle.

A rule may also ask for data loaders (`pd.read_csv`...), whose result counts as large of unknown size;
then so does what is derived from it by a method that keeps most of it (`df.drop("label", axis=1)`,
`.astype(...)`, `.values`), the parts of `train_test_split`, and the result of a function or static
method of the module that returns such a value (its parameters bound to the call's arguments).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    AFTER_ALL,
    LARGE_MARKER,
    MAX_FOLD_DEPTH,
    Binding,
    FunctionInfo,
    Scope,
    constant_int,
    is_static,
    iter_subtree,
)
from ray_lint.rule import Option

# Pre-filter tokens of a file that may hold an allocation this module can fold.
ALLOCATION_TOKENS = (
    "zeros", "ones(", "ones_like", "empty(", "empty_like", "full(", "full_like", "rand(", "randn(", "randint(",
    "random(", "random_sample(", "uniform(", "normal(", "bytes(", "bytearray(", "' *", '" *', "] *", "* [",
    "*[", "* b'", '* b"', "* '", '* "', "arange(", "linspace(", "MNIST(", "CIFAR10", LARGE_MARKER,
)
# torchvision datasets that hold every image of their split in one in-memory array: (train, test) bytes, the
# uint8 images and the labels (an int64 tensor for the MNIST family, a list of ints for CIFAR: ~5 bytes each
# pickled). A split the code does not name literally counts as the smaller one.
_MNIST_SPLITS = (60_000 * (28 * 28 + 8), 10_000 * (28 * 28 + 8))
_CIFAR_SPLITS = (50_000 * (32 * 32 * 3 + 5), 10_000 * (32 * 32 * 3 + 5))
IN_MEMORY_DATASETS = {
    **{f"torchvision.datasets.{name}": _MNIST_SPLITS for name in ("MNIST", "FashionMNIST", "KMNIST")},
    **{f"torchvision.datasets.{name}": _CIFAR_SPLITS for name in ("CIFAR10", "CIFAR100")},
}
# Data loaders whose result is usually a dataset: large, though the code does not say how large. Not Hugging
# Face `datasets.load_dataset` / `load_from_disk`: their Arrow tables are memory-mapped and pickle as a path;
# nor raw reads (`f.read()`, `json.load`), which configs and prompt templates share.
DATA_LOADERS = (
    "numpy.load", "numpy.loadtxt", "numpy.genfromtxt", "numpy.fromfile", "pandas.read_csv", "pandas.read_parquet",
    "pandas.read_feather", "pandas.read_pickle", "pandas.read_hdf", "pandas.read_json", "pandas.read_table",
    "torch.load", "pickle.load", "joblib.load",
)
# The loaders whose result counts as large: not `pickle.load`, whose file holds a config or a tuning result as
# often as data (a file read whole is still an expensive set-up, `DATA_LOADERS`).
LARGE_LOADERS = tuple(name for name in DATA_LOADERS if name != "pickle.load")
IN_MEMORY_FILES = frozenset({"io.StringIO", "io.BytesIO"})
LOADER_TOKENS = ("load(", "loadtxt(", "genfromtxt(", "fromfile(", "read_")
SIZE_TOKENS = (*ALLOCATION_TOKENS, *LOADER_TOKENS)  # a file without one holds nothing this module calls large
LOADERS_OPTION = Option(
    "large-loaders",
    list(LARGE_LOADERS),
    "Qualified names of data loaders whose result counts as large, though its size is unknown; [] counts only "
    "sizes the code shows.",
)
# Ray warns when a pickled remote function passes 10**7 bytes (FUNCTION_SIZE_WARN_THRESHOLD).
LARGE_OBJECT_OPTION = Option(
    "large-object-mb",
    10,
    "Size, in megabytes (10**6 bytes), from which an object counts as large. Sizes are folded only from "
    "allocations with literal shapes; mark any other value with a `# ray-lint: large` comment.",
)

_NUMPY_FILLED = frozenset({"numpy.zeros", "numpy.ones", "numpy.empty"})  # (shape, dtype=float64)
_NUMPY_RANDOM_DIMS = frozenset({"numpy.random.rand", "numpy.random.randn"})  # (*dims), float64
# (..., size=...): the positional index of `size`; items are float64 (randint: int64 unless `dtype=`)
_NUMPY_RANDOM_SIZE = {
    "numpy.random.random": 0,
    "numpy.random.random_sample": 0,
    "numpy.random.uniform": 2,
    "numpy.random.normal": 2,
    "numpy.random.randint": 2,
}
_NUMPY_LIKE = frozenset({"numpy.zeros_like", "numpy.ones_like", "numpy.empty_like", "numpy.copy"})
_TORCH_FILLED = frozenset(
    {"torch.zeros", "torch.ones", "torch.empty", "torch.rand", "torch.randn"}
)  # (*size or a sequence, dtype=float32)
_TORCH_LIKE = frozenset({"torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.clone"})
_COPY_METHODS = frozenset({"copy", "clone"})
# Methods of a loaded frame, array or tensor whose result keeps most of it (a column or two dropped, a new
# dtype, the same rows in another order or shape); `.values` too. Row filters and column picks are not here.
_LOADED_DATA_KEEPING_METHODS = frozenset({
    "drop", "astype", "fillna", "reset_index", "sort_values", "to_numpy", "reshape", "float",
})
_LOADED_DATA_KEEPING_ATTRIBUTES = frozenset({"values"})
# Splitters of arrays into parts, two per array (train, test): `X_train, X_test, y_train, y_test = ...`.
_SPLITTERS = frozenset({"sklearn.model_selection.train_test_split"})
_ARANGES = frozenset({"numpy.arange", "torch.arange"})  # integer bounds: int64 items unless `dtype=`

_NUMPY_ITEM_SIZES = {
    "float64": 8, "float_": 8, "double": 8, "float": 8, "float32": 4, "single": 4, "float16": 2, "half": 2,
    "int64": 8, "int_": 8, "int": 8, "uint64": 8, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2,
    "int8": 1, "uint8": 1, "bool": 1, "bool_": 1, "complex128": 16, "complex64": 8, "complex": 16,
}
_TORCH_ITEM_SIZES = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2,
    "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "short": 2, "int8": 1, "uint8": 1, "bool": 1,
    "complex64": 8, "complex128": 16,
}
_BUILTINS = frozenset({"bytes", "bytearray", "float", "int", "bool", "complex"})


@dataclass(frozen=True)
class Size:
    """The size of an object, and the expression that made it."""

    bytes: int | None  # None: marked `# ray-lint: large`, or loaded from a file: size not known
    allocation: cst.BaseExpression
    loader: str | None = None  # the data loader that made it (`numpy.load`), when a rule asked for loaders

    def at_least(self, threshold: int) -> bool:
        return self.bytes is None or self.bytes >= threshold

    def describe(self) -> str:
        if self.loader is not None:
            return f"loaded by `{self.loader.replace('numpy.', 'np.').replace('pandas.', 'pd.')}`; size unknown"
        if self.bytes is None:
            return "marked `# ray-lint: large`"
        return f"about {format_bytes(self.bytes)}"


def format_bytes(count: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if count >= scale:
            value = count / scale
            return f"{value:.0f} {unit}" if value >= 10 else f"{value:.1f} {unit}"
    return f"{count} bytes"


def threshold_bytes(settings: dict[str, object]) -> int:
    """The threshold a rule with `LARGE_OBJECT_OPTION` was configured with, in bytes."""
    megabytes = settings[LARGE_OBJECT_OPTION.name]
    assert isinstance(megabytes, int)
    return megabytes * 10**6


class SizeFolder:
    """Folds sizes for one module; `size_of` is the way in. `loaders`: qualified names of functions whose
    result counts as large though its size is unknown (data loaders, for the rules that ask for them)."""

    def __init__(self, model: SemanticModel, loaders: frozenset[str] = frozenset()) -> None:
        self.model = model
        self.loaders = loaders
        # While the returns of a called function of the module are folded: its parameters' arguments, as
        # (expression, the caller's scope, event), by the id of the function's scope.
        self._arguments: dict[int, dict[str, tuple[cst.BaseExpression, Scope, int]]] = {}

    def size_of(self, expr: cst.BaseExpression, scope: Scope, at: int, depth: int = 0) -> Size | None:
        if depth > MAX_FOLD_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            return self._size_of_name(expr.value, scope, at, depth)
        if isinstance(expr, cst.Call):
            return self._size_of_call(expr, scope, at, depth)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
            return self._size_of_repetition(expr, scope, at, depth)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.DictComp)):
            return self._size_of_comprehension(expr, depth)
        if isinstance(expr, cst.Attribute) and self.loaders and expr.attr.value in _LOADED_DATA_KEEPING_ATTRIBUTES:
            return _loaded(self.size_of(expr.value, scope, at, depth), expr)
        return None

    def _size_of_comprehension(self, expr: cst.ListComp | cst.SetComp | cst.DictComp, depth: int) -> Size | None:
        """A comprehension of one `for`, no `if`, over a count the code shows (`range(50)`), whose element
        (a dict's value) is an allocation this module folds: the sum (for a set, one element's size)."""
        loop = self.model.loop_of(expr)
        if loop is None or expr.for_in.ifs or expr.for_in.inner_for_in is not None:
            return None
        count = self.model.literal_iterations(loop)
        element = expr.value if isinstance(expr, cst.DictComp) else expr.elt
        each = self.size_of(element, loop.scope, loop.start, depth + 1)
        if count is None or each is None or each.bytes is None:
            return None
        return Size(count * each.bytes if not isinstance(expr, cst.SetComp) else each.bytes, expr)

    def _size_of_name(self, name: str, scope: Scope, at: int, depth: int) -> Size | None:
        binding = self.model.reaching_binding(name, scope, at)
        if binding is None:
            return None
        if binding.kind == "param":
            argument = self._arguments.get(id(binding.scope), {}).get(name)
            return self.size_of(argument[0], argument[1], argument[2], depth + 1) if argument is not None else None
        if binding.kind != "assign":
            return None
        if binding.value is None:  # unpacked: `X_train, X_test, y_train, y_test = train_test_split(X, y)`
            source, unpacked = binding.source, _unpacked_position(binding) if self.loaders else None
            if source is None or unpacked is None:
                return None
            position, count = unpacked
            return self._size_of_part(source, position, count, binding.scope, binding.index, depth + 1)
        if id(binding.statement) in self.model.marked_large:
            return Size(None, binding.value)
        return self.size_of(binding.value, binding.scope, binding.index, depth + 1)

    def _size_of_part(
        self, value: cst.BaseExpression, position: int, count: int, scope: Scope, at: int, depth: int
    ) -> Size | None:
        """The size of item `position` of `value` unpacked into `count` names, when it is loaded data: an
        item of a tuple or list of that length, a part of a split, an item of what a function of the module
        returns."""
        if depth > MAX_FOLD_DEPTH:
            return None
        if isinstance(value, (cst.Tuple, cst.List)):
            elements = value.elements
            if len(elements) != count or any(isinstance(element, cst.StarredElement) for element in elements):
                return None
            return _loaded(self.size_of(elements[position].value, scope, at, depth), value)
        if not isinstance(value, cst.Call):
            return None
        if self.model.qualified_name(value.func, scope, at) in _SPLITTERS:
            arrays = [arg.value for arg in value.args if arg.keyword is None]
            if any(arg.star for arg in value.args) or count != 2 * len(arrays):
                return None
            return _loaded(self.size_of(arrays[position // 2], scope, at, depth), value)
        return self._size_of_returned(value, scope, at, lambda returned, inner: self._size_of_part(
            returned, position, count, inner, AFTER_ALL, depth + 1
        ))

    def _size_of_returned(
        self, call: cst.Call, scope: Scope, at: int, fold: Callable[[cst.BaseExpression, Scope], Size | None]
    ) -> Size | None:
        """Loaded data that a function of the module called by `call` returns: `fold` of every value it
        returns, in its scope, with its parameters bound to the call's arguments."""
        function = self._callee(call)
        if function is None or id(function.scope) in self._arguments or any(arg.star for arg in call.args):
            return None  # not the module's, recursive, or arguments unpacked
        params = function.node.params
        positional = [param.name.value for param in (*params.posonly_params, *params.params)]
        arguments: dict[str, tuple[cst.BaseExpression, Scope, int]] = {}
        for index, arg in enumerate(arg for arg in call.args if arg.keyword is None):
            if index < len(positional):
                arguments[positional[index]] = (arg.value, scope, at)
        for arg in call.args:
            if arg.keyword is not None:
                arguments[arg.keyword.value] = (arg.value, scope, at)
        returns = [node for node in iter_subtree(function.node.body, into_functions=False) if isinstance(node, cst.Return)]
        returned = [node.value for node in returns if node.value is not None]
        if not returned or len(returned) != len(returns):
            return None
        self._arguments[id(function.scope)] = arguments
        try:
            sizes = [fold(value, function.scope) for value in returned]
        finally:
            del self._arguments[id(function.scope)]
        loaded = [size.loader for size in sizes if size is not None and size.loader is not None]
        return Size(None, call, loaded[0]) if len(loaded) == len(sizes) else None

    def _callee(self, call: cst.Call) -> FunctionInfo | None:
        """The function of this module that `call` runs (`model.local_callee`): an undecorated `def`, or a
        static method called through its class (`DataUtils.get_data(path)`)."""
        callee = self.model.local_callee(None, call)
        return callee if callee is not None and (not callee.node.decorators or is_static(callee)) else None

    def _size_of_call(self, call: cst.Call, scope: Scope, at: int, depth: int) -> Size | None:
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _COPY_METHODS and not call.args:
            copied = self.size_of(func.value, scope, at, depth + 1)
            return Size(copied.bytes, call, copied.loader) if copied is not None else None
        if isinstance(func, cst.Attribute) and self.loaders and func.attr.value in _LOADED_DATA_KEEPING_METHODS:
            return _loaded(self.size_of(func.value, scope, at, depth), call)
        name = self.model.qualified_name(func, scope, at) or _builtin(func, self.model, scope, at)
        if name is None:
            if self.loaders:
                return self._size_of_returned(call, scope, at, lambda returned, inner: self.size_of(
                    returned, inner, AFTER_ALL, depth + 1
                ))
            return None
        if name in self.loaders:
            source = call.args[0].value if call.args else None
            if isinstance(source, cst.Call) and self.model.qualified_name(source.func, scope, at) in IN_MEMORY_FILES:
                return None  # parsed from a string or bytes in memory (a request's body): no bigger than that
            return Size(None, call, loader=name)
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        if any(arg.star for arg in call.args):
            return None
        if name in IN_MEMORY_DATASETS:
            train, test = IN_MEMORY_DATASETS[name]
            split = keywords.get("train", positional[1] if len(positional) > 1 else cst.Name("True"))
            return Size(train if isinstance(split, cst.Name) and split.value == "True" else test, call)
        count: int | None = None
        item_size: int | None = None
        if name in _NUMPY_FILLED or name == "numpy.full":
            shape = positional[0] if positional else keywords.get("shape")
            dtype_at = 2 if name == "numpy.full" else 1
            dtype = positional[dtype_at] if len(positional) > dtype_at else keywords.get("dtype")
            count = self._count(shape, scope, at, depth)
            item_size = self._dtype_size(dtype, scope, at, _NUMPY_ITEM_SIZES, 8)
            if name == "numpy.full" and dtype is None:
                fill = positional[1] if len(positional) > 1 else keywords.get("fill_value")
                item_size = 8 if isinstance(fill, (cst.Integer, cst.Float)) else None
        elif name in _NUMPY_RANDOM_DIMS:
            count = self._product(positional, scope, at, depth) if positional and not keywords else None
            item_size = 8
        elif name in _NUMPY_RANDOM_SIZE:
            size_at = _NUMPY_RANDOM_SIZE[name]
            size = positional[size_at] if len(positional) > size_at else keywords.get("size")
            count = self._count(size, scope, at, depth) if size is not None else None
            dtype = positional[3] if name == "numpy.random.randint" and len(positional) > 3 else keywords.get("dtype")
            item_size = self._dtype_size(dtype, scope, at, _NUMPY_ITEM_SIZES, 8)
        elif name in _TORCH_FILLED or name == "torch.full":
            shape_args = positional[:1] if name == "torch.full" else positional
            if len(shape_args) == 1 and isinstance(shape_args[0], (cst.Tuple, cst.List)):
                count = self._count(shape_args[0], scope, at, depth)
            elif shape_args:
                count = self._product(shape_args, scope, at, depth)
            item_size = self._dtype_size(keywords.get("dtype"), scope, at, _TORCH_ITEM_SIZES, 4)
        elif name in _ARANGES and positional and len(positional) <= 3 and set(keywords) <= {"dtype"}:
            bounds = [constant_int(self.model, value, scope, at, depth, signed=True) for value in positional]
            if all(bound is not None for bound in bounds) and bounds[-1 if len(bounds) == 3 else 0] != 0:
                count = len(range(*bounds))  # type: ignore[arg-type]
            table, default = (_TORCH_ITEM_SIZES, 8) if name.startswith("torch") else (_NUMPY_ITEM_SIZES, 8)
            item_size = self._dtype_size(keywords.get("dtype"), scope, at, table, default)
        elif name == "numpy.linspace" and len(positional) == 3 and not keywords:
            count, item_size = constant_int(self.model, positional[2], scope, at, depth), 8
        elif name in ("bytes", "bytearray") and len(positional) == 1 and not keywords:
            count, item_size = constant_int(self.model, positional[0], scope, at, depth), 1
        elif (name in _NUMPY_LIKE or name in _TORCH_LIKE) and positional and "dtype" not in keywords:
            copied = self.size_of(positional[0], scope, at, depth + 1)
            return Size(copied.bytes, call) if copied is not None else None
        if count is None or item_size is None:
            return None
        return Size(count * item_size, call)

    def _size_of_repetition(self, expr: cst.BinaryOperation, scope: Scope, at: int, depth: int) -> Size | None:
        """`b"x" * n`, `"ab" * n`, `[0] * n` (either way round)."""
        for sequence, times in ((expr.left, expr.right), (expr.right, expr.left)):
            count = constant_int(self.model, times, scope, at, depth)
            if count is None:
                continue
            if isinstance(sequence, cst.SimpleString):
                value = sequence.evaluated_value
                if isinstance(value, bytes) or (isinstance(value, str) and value.isascii()):
                    return Size(len(value) * count, expr)
            if isinstance(sequence, cst.List) and sequence.elements:
                per_element = [_pickled_scalar_size(element.value) for element in sequence.elements]
                if all(size is not None for size in per_element):
                    return Size(sum(per_element) * count, expr)  # type: ignore[arg-type]
        return None

    def _count(self, shape: cst.BaseExpression | None, scope: Scope, at: int, depth: int) -> int | None:
        """The number of items of a shape: an int, or a tuple or list of ints."""
        if isinstance(shape, (cst.Tuple, cst.List)):
            if any(not isinstance(element, cst.Element) for element in shape.elements):
                return None
            return self._product([element.value for element in shape.elements], scope, at, depth)
        return constant_int(self.model, shape, scope, at, depth)

    def _product(self, factors: list[cst.BaseExpression], scope: Scope, at: int, depth: int) -> int | None:
        product = 1
        for factor in factors:
            value = constant_int(self.model, factor, scope, at, depth)
            if value is None or value < 0:
                return None
            product *= value
        return product

    def _dtype_size(
        self, dtype: cst.BaseExpression | None, scope: Scope, at: int, sizes: dict[str, int], default: int
    ) -> int | None:
        if dtype is None:
            return default
        if isinstance(dtype, cst.SimpleString):
            value = dtype.evaluated_value
            return sizes.get(value) if isinstance(value, str) else None
        name = self.model.qualified_name(dtype, scope, at) or _builtin(dtype, self.model, scope, at)
        if name is None:
            return None
        library, _, short = name.rpartition(".")
        return sizes.get(short) if library in ("numpy", "torch", "") else None


def _loaded(size: Size | None, derived: cst.BaseExpression) -> Size | None:
    """`derived`, made from a value of `size`, as loaded data of unknown size when that value is loaded data."""
    return Size(None, derived, size.loader) if size is not None and size.loader is not None else None


def _unpacked_position(binding: Binding) -> tuple[int, int] | None:
    """Where the name of an unpacking binding is in its flat tuple or list target: (position, length)."""
    assign = binding.statement
    if not isinstance(assign, cst.Assign) or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or any(isinstance(e, cst.StarredElement) for e in target.elements):
        return None
    for position, element in enumerate(target.elements):
        if element.value is binding.node:
            return position, len(target.elements)
    return None


def _builtin(expr: cst.BaseExpression, model: SemanticModel, scope: Scope, at: int) -> str | None:
    """`bytes`, `float`...: a builtin name that nothing in the module rebinds."""
    if isinstance(expr, cst.Name) and expr.value in _BUILTINS and model.reaching_binding(expr.value, scope, at) is None:
        return expr.value
    return None


def _pickled_scalar_size(expr: cst.BaseExpression) -> int | None:
    """A lower bound of the pickled size of one literal list element."""
    if isinstance(expr, cst.Float):
        return 9
    if isinstance(expr, cst.Integer):
        value = expr.evaluated_value
        if isinstance(value, int):
            return 2 if value < 256 else 3 if value < 65536 else 5
    if isinstance(expr, cst.Name) and expr.value in ("None", "True", "False"):
        return 1
    return None


def size_of(
    model: SemanticModel, expr: cst.BaseExpression, scope: Scope, at: int, loaders: frozenset[str] = frozenset()
) -> Size | None:
    """The size of the object `expr` holds at event `at`, when the code makes it certain; with `loaders`,
    also the result of one of those data loaders, as large of unknown size."""
    folder = SizeFolder(model, loaders) if loaders else model.analysis(SizeFolder)
    return folder.size_of(expr, scope, at)
