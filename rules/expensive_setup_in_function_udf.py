"""RAY102 expensive-setup-in-function-udf: a function UDF (or function Serve deployment) that loads a model or
opens a client on every call."""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Experiment, Plan, Subject, Variant, script, timed
from ray_lint.libraries import DATA_TOKENS, SERVE_TOKENS, defined_function_or_class
from ray_lint.libraries.data import UDF_METHODS, DatasetFacts, udf_of
from ray_lint.libraries.serve import ServeFacts
from ray_lint.loaders import MODEL_LOADER_METHODS, MODEL_LOADERS
from ray_lint.model import SemanticModel
from ray_lint.python_model import (
    CallSite,
    FunctionInfo,
    child_nodes,
    iter_subtree,
    names_read,
    target_names,
)
from ray_lint.rule import Context, Invalid, Rule, Valid
from ray_lint.sizes import DATA_LOADERS

# Calls that build something costly to make once per row or batch: a model, a tokenizer, a session, a client.
SETUP_CALLS = MODEL_LOADERS | {"boto3.client", "boto3.resource"}
MAX_HELPER_DEPTH = 2
# Text a module needs to make a Serve deployment (the decorator, bare or with options, or the call form):
# Ray's own Serve code says "deployment" in almost every file without making one.
DEPLOYMENT_TOKENS = ("@serve.deployment", "@deployment", "serve.deployment(")
# Text one of the calls above needs in the file, whatever its import style.
SETUP_TOKENS = (
    "load", "from_pretrained", "pipeline", "InferenceSession", "client", "resource", "SentenceTransformer", "LLM",
    "YOLO", "Booster", "create_model", "read_",
)


class _Setups:
    """Where a function builds something costly on every call, whatever its arguments: a known loader
    whose arguments do not come from the function's parameters, in the function itself or in a helper
    of the module it calls (not one behind a cache decorator), to `MAX_HELPER_DEPTH` calls."""

    def __init__(self, model: SemanticModel) -> None:
        self.model = model
        self._found: dict[int, tuple[str, cst.Call] | None] = {}

    def of(self, node: cst.FunctionDef | cst.Lambda, depth: int = 0) -> tuple[str, cst.Call] | None:
        """The loader call, as shown in a message (`torch.load(...)`), with the call of the function's own
        body that runs it (the loader itself, or the helper's call), or None."""
        key = id(node)
        if key in self._found:
            return self._found[key]
        if depth > MAX_HELPER_DEPTH:
            return None  # not remembered: asked nearer the UDF, the same function is followed
        self._found[key] = None  # recursion: nothing through itself
        if _caches(node):
            return None
        tainted = _from_parameters(node)
        for call in _unconditional_calls(node):
            if names_read(call) & tainted:
                continue  # per-row work: it loads what the row names
            site = self.model.call_site(call)
            if site is None:
                continue
            shown = self._setup(site)
            if shown is None:
                helper = self._helper(site)
                through = self.of(helper.node, depth + 1) if helper is not None else None
                shown = through[0] if through is not None else None
            if shown is not None:
                self._found[key] = (shown, call)
                break
        return self._found[key]

    def _setup(self, site: CallSite) -> str | None:
        call = site.node
        name = self.model.call_name(site)
        if name is not None and (name in SETUP_CALLS or name in DATA_LOADERS):
            return f"`{'.'.join(name.split('.')[-2:])}(...)`"  # `torch.load`, `keras.models.load_model`: the last two parts
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in MODEL_LOADER_METHODS:
            return f"`.{call.func.attr.value}(...)`"
        return None

    def _helper(self, site: CallSite) -> FunctionInfo | None:
        if not isinstance(site.node.func, cst.Name):
            return None
        found = defined_function_or_class(self.model, site.node.func, site.scope, site.index)
        return found if isinstance(found, FunctionInfo) else None


def _caches(node: cst.FunctionDef | cst.Lambda) -> bool:
    """A function that caches what it builds: behind `@lru_cache`/`@cache`."""
    if isinstance(node, cst.Lambda):
        return False
    for decorator in node.decorators:
        target = decorator.decorator.func if isinstance(decorator.decorator, cst.Call) else decorator.decorator
        name = target.attr.value if isinstance(target, cst.Attribute) else target.value if isinstance(target, cst.Name) else ""
        if name in ("lru_cache", "cache", "cached"):
            return True
    return False


def _outer_names(node: cst.FunctionDef | cst.Lambda) -> set[str]:
    """The names the function declares `global` or `nonlocal`: what it stores there outlives the call."""
    return {
        item.name.value
        for current in iter_subtree(node.body, into_functions=False)
        if isinstance(current, (cst.Global, cst.Nonlocal))
        for item in current.names
    }


def _unconditional_calls(node: cst.FunctionDef | cst.Lambda) -> list[cst.Call]:
    """The calls that run on every call of the function: not under an `if`, a conditional expression or
    a `try`, nor stored into a cache (`CACHE[key] = load()`, `self.model = load()`, or a `global` or
    `nonlocal` name: `_model = _model or load()`)."""
    outer = _outer_names(node)
    found: list[cst.Call] = []
    stack: list[cst.CSTNode] = [node.body]
    while stack:
        current = stack.pop()
        if isinstance(current, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.If, cst.IfExp, cst.Try, cst.While)):
            continue
        if isinstance(current, cst.Assign) and any(
            isinstance(t.target, (cst.Subscript, cst.Attribute)) or target_names(t.target) & outer for t in current.targets
        ):
            continue
        if isinstance(current, cst.Call):
            found.append(current)
        stack.extend(reversed(list(child_nodes(current))))
    return found


def _from_parameters(node: cst.FunctionDef | cst.Lambda) -> set[str]:
    """The parameters and every local name computed from them (`path = row["path"]`, `for p in row["paths"]`,
    `with open(path) as f`): what a call that reads the row reads."""
    params = node.params
    tainted = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    tainted |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
    flows: list[tuple[set[str], set[str]]] = []  # (names bound, names read to compute them)
    for current in iter_subtree(node.body, into_functions=False):
        if isinstance(current, cst.Assign):
            bound = set().union(*(target_names(t.target) for t in current.targets))
            flows.append((bound, names_read(current.value)))
        elif isinstance(current, (cst.AnnAssign, cst.AugAssign)) and current.value is not None:
            flows.append((target_names(current.target), names_read(current.value)))
        elif isinstance(current, (cst.For, cst.CompFor)):
            flows.append((target_names(current.target), names_read(current.iter)))
        elif isinstance(current, cst.WithItem) and current.asname is not None:
            flows.append((target_names(current.asname.name), names_read(current.item)))
        elif isinstance(current, cst.NamedExpr):
            flows.append((target_names(current.target), names_read(current.value)))
    changed = True
    while changed:
        changed = False
        for bound, read in flows:
            if read & tainted and not bound <= tainted:
                tainted |= bound
                changed = True
    return tainted


@dataclass(frozen=True)
class SetupFacts:
    """What runs the set-up on every call: a Ray Data UDF, or a Serve function deployment."""

    serve: bool


class SetupPerBatchExperiment(Experiment[SetupFacts]):
    """A UDF whose "model load" takes 0.05 s, over 100 batches: as a function, which loads it for every
    batch, and as a callable class on a pool of one actor, which loads it once. One actor, not two: on a
    2-CPU cluster two actors hold both CPUs and the read tasks that feed them never start. For a Serve
    function deployment, 20 requests to it against the same load in a class deployment's `__init__`."""

    facts_type = SetupFacts
    shares_driver = True
    more_parallelism = False  # the fix saves repeated set-up, not by running more at once
    BATCHES = 100
    REQUESTS = 20
    SETUP_SECONDS = 0.05

    def plan(self, subject: Subject) -> Plan:
        if self.facts(subject).serve:
            return self._serve_plan()
        setup = (
            "ray.data.DataContext.get_current().enable_progress_bars = False\n\n"
            f"def load_model():\n    time.sleep({self.SETUP_SECONDS})  # stands for loading weights\n"
            "    return lambda ids: ids * 2\n\n"
            "def predict(batch):\n    model = load_model()\n    batch['y'] = model(batch['id'])\n    return batch\n\n"
            "class Predictor:\n    def __init__(self):\n        self.model = load_model()\n\n"
            "    def __call__(self, batch):\n        batch['y'] = self.model(batch['id'])\n        return batch\n\n"
            "ray.data.range(10).map_batches(lambda b: b).materialize()  # the workers up before the clock starts\n"
        )
        rows = self.BATCHES * 100
        consume = (
            f"ds = ray.data.range({rows}, override_num_blocks=10).map_batches({{udf}}, batch_size=100{{options}})\n"
            "return sum(int(batch['y'].sum()) for batch in ds.iter_batches(batch_size=None))"
        )
        return Plan(
            Variant("function", script(setup + timed(consume.format(udf="predict", options="")))),
            Variant(
                "callable class",
                script(setup + timed(consume.format(udf="Predictor", options=", compute=ray.data.ActorPoolStrategy(size=1)"))),
            ),
            "modelled",
            f"a {self.SETUP_SECONDS:g} s set-up over {self.BATCHES} batches, per batch vs once in one actor",
        )

    def _serve_plan(self) -> Plan:
        """Serve starts (without an HTTP proxy) and the replica answers a first request before the clock
        starts; Serve is shut down after it stops."""
        load = f"def load_model():\n    time.sleep({self.SETUP_SECONDS})  # stands for loading weights\n    return lambda x: x * 2\n\n"
        per_request = "@serve.deployment\ndef predict(x):\n    model = load_model()\n    return model(x)\n\n"
        once = (
            "@serve.deployment\nclass Predict:\n    def __init__(self):\n        self.model = load_model()\n\n"
            "    def __call__(self, x):\n        return self.model(x)\n\n"
        )
        start = (
            "serve.start(proxy_location='Disabled')\n"
            "handle = serve.run({app}.bind(), name='ray_lint_RAY102', route_prefix=None)\n"
            "handle.remote(-1).result(timeout_s=30)  # the replica up before the clock starts\n"
        )
        body = timed(f"return [handle.remote(i).result(timeout_s=30) for i in range({self.REQUESTS})]") + "serve.shutdown()\n"
        return Plan(
            Variant("function deployment", script(load + per_request + start.format(app="predict") + body, ("serve",))),
            Variant("class deployment", script(load + once + start.format(app="Predict") + body, ("serve",))),
            "modelled",
            f"a {self.SETUP_SECONDS:g} s set-up over {self.REQUESTS} requests, per request vs once in `__init__`",
        )


class ExpensiveSetupInFunctionUdf(Rule):
    code = "RAY102"
    name = "expensive-setup-in-function-udf"
    message = "A function UDF or Serve deployment loads a model or opens a client on every call: use a class"
    severity = Severity.WARNING
    category = "perf"
    tokens = (".map(", ".map_batches(", ".flat_map(", ".filter(")
    also_tokens = DATA_TOKENS
    experiment = SetupPerBatchExperiment()
    docs = """
## What it does
Finds a function (or lambda) handed to `map`, `map_batches`, `flat_map` or `filter` of a Ray
Data dataset that builds something costly on every call: a model or tokenizer
(`.from_pretrained(...)`, `transformers.pipeline`, `torch.load`, `torch.jit.load`,
`torch.hub.load`, `keras.models.load_model`, `onnxruntime.InferenceSession`,
`SentenceTransformer`, `spacy.load`, `mlflow.*.load_model`, ...), a client (`boto3.client`,
`boto3.resource`) or a whole data file (`pickle.load`, `joblib.load`, `numpy.load`,
`pandas.read_csv`, ...), directly or in a helper function of the module it calls (two calls
deep). It also finds the same set-up in a function Ray Serve deployment (`@serve.deployment` on a
`def`), whose body Serve runs for every request.

## Why is this bad?
Ray Data calls a function UDF once per row (`map`, `flat_map`, `filter`) or per batch
(`map_batches`), in short-lived tasks: whatever the function builds, it builds again each time.
Loading weights takes seconds, so the pipeline spends its time loading models rather than
using them. A callable class does the setup once, in `__init__`, on each actor of its pool,
and its `__call__` reuses it. Ray Data's guide on stateful transforms recommends exactly this.
A function Serve deployment is the same: each replica calls the function once per request
(Ray 2.60's replica keeps the function itself as its callable), so a model loaded in it is
loaded again for every request; a class deployment loads it once per replica in `__init__`.
Measured with Ray 2.60 on a 2-core machine: a 0.05 s "model load" over 100 batches took
4.5 s as a function UDF and 1.1 s as a callable class on one actor (3.9×; 2.3× on a busier
run); the gap grows with the load time, and real weights take seconds, not 0.05 s. Through Serve,
20 requests to a function deployment with the same 0.05 s load took 1.12 s, against 0.08 s for
a class deployment that loads in `__init__`.

ray-lint is silent when the load cannot run on every call: under an `if`, a conditional
expression or a `try`, stored into a cache (`CACHE[key] = load()`) or into a `global` or
`nonlocal` name (lazy initialisation: `_model = _model or load()`), or in a function decorated
with `@lru_cache`/`@cache`. A `global` that holds something else (the last good row) does not
make the function's loads a cache.
It is also silent when the loader's arguments come from the row or batch (`torch.load(row["path"])`
loads the row's own data: that is the work, not setup), for classes (the fix), and for functions
imported from other modules. A class Serve deployment is not checked: its `__init__` is the fix.

## Example
```python
def predict(batch):
    model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")
    batch["label"] = model(**tokenize(batch["text"])).logits.argmax(-1).numpy()
    return batch

ds.map_batches(predict, batch_size=64)
```

## Use instead
```python
class Predictor:
    def __init__(self):
        self.model = AutoModelForSequenceClassification.from_pretrained("distilbert-base-uncased")

    def __call__(self, batch):
        batch["label"] = self.model(**tokenize(batch["text"])).logits.argmax(-1).numpy()
        return batch

ds.map_batches(Predictor, batch_size=64, compute=ray.data.ActorPoolStrategy(size=4))
```
`compute=ActorPoolStrategy(...)` sets the pool's size (Ray 2.60 deprecates `concurrency=`).
For a Serve deployment, `@serve.deployment class Generator:` with the model built in `__init__`
and used in `__call__(self, request)`.

## Fix safety
There is no fix: the function becomes a class, whose name and pool size are the user's choice.

## References
- [Transforming data: stateful transforms](https://docs.ray.io/en/latest/data/transforming-data.html)
- [End-to-end: offline batch inference](https://docs.ray.io/en/latest/data/batch_inference.html)
- [Ray Serve: key concepts (deployments)](https://docs.ray.io/en/latest/serve/key-concepts.html)
"""

    VALID = [
        Valid(
            "import ray\nfrom transformers import AutoModel\n\nclass Embed:\n    def __init__(self):\n"
            "        self.model = AutoModel.from_pretrained('bert-base-uncased')\n\n    def __call__(self, batch):\n"
            "        return self.model(batch)\n\nds = ray.data.range(10).map_batches(Embed, compute=ray.data.ActorPoolStrategy(size=2))\n",
            "a callable class: the fix",
        ),
        Valid(
            "import ray\nimport torch\n\n_model = None\n\ndef predict(batch):\n    global _model\n    if _model is None:\n"
            "        _model = torch.load('model.pt')\n    return _model(batch)\n\nds = ray.data.range(10).map_batches(predict)\n",
            "a lazily initialised module-level cache",
        ),
        Valid(
            "import ray\nimport torch\n\n_model = None\n\ndef predict(batch):\n    global _model\n"
            "    _model = _model or torch.load('model.pt')\n    return _model(batch)\n\nds = ray.data.range(10).map_batches(predict)\n",
            "a module-level cache filled with `or`",
        ),
        Valid(
            "import ray\nimport torch\n\ndef load(row):\n    row['tensor'] = torch.load(row['path'])\n    return row\n\n"
            "ds = ray.data.read_csv('files.csv').map(load)\n",
            "the row names what to load: that is the work, not setup",
        ),
        Valid(
            "import functools\nimport ray\nimport joblib\n\n@functools.lru_cache(maxsize=1)\ndef get_model():\n"
            "    return joblib.load('model.joblib')\n\ndef predict(batch):\n    batch['y'] = get_model().predict(batch['x'])\n"
            "    return batch\n\nds = ray.data.range(10).map_batches(predict)\n",
            "the helper is cached: one load per worker process",
        ),
        Valid(
            "import ray\nimport pickle\n\n_CACHE = {}\n\ndef predict(batch):\n    if 'model' not in _CACHE:\n"
            "        _CACHE['model'] = pickle.load(open('m.pkl', 'rb'))\n    return _CACHE['model'](batch)\n\n"
            "ds = ray.data.range(10).map_batches(predict)\n",
            "a cache dict filled once",
        ),
        Valid(
            "import torch\n\ndef predict(batch):\n    model = torch.load('model.pt')\n    return model(batch)\n\nout = [predict(b) for b in batches]\n",
            "not a Ray Data UDF",
        ),
        Valid(
            "import ray\nimport boto3\n\ndef make_udf():\n    s3 = boto3.client('s3')\n    def fetch(row):\n"
            "        row['body'] = s3.get_object(Bucket='b', Key=row['key'])['Body'].read()\n        return row\n"
            "    return fetch\n\nds = ray.data.range(10).map(make_udf())\n",
            "a factory builds the client once, on the driver",
        ),
        Valid(
            "import ray\nimport pandas as pd\n\ndef read(row):\n    with open(row['path']) as f:\n        row['table'] = pd.read_csv(f)\n"
            "    return row\n\nds = ray.data.read_csv('index.csv').flat_map(read)\n",
            "the file read comes from the row, through a `with`",
        ),
        Valid(
            "from ray import serve\nfrom transformers import pipeline\n\n@serve.deployment\nclass Generator:\n"
            "    def __init__(self):\n        self.model = pipeline('text-generation', model='gpt2')\n\n"
            "    def __call__(self, request):\n        return self.model(request.query_params['query'])\n\n"
            "app = Generator.bind()\n",
            "a class Serve deployment loads once per replica: the fix",
        ),
        Valid(
            "from ray import serve\nfrom transformers import pipeline\n\ngenerator = pipeline('text-generation', model='gpt2')\n\n"
            "def load_tokenizer():\n    return AutoTokenizer.from_pretrained('gpt2')\n\n"
            "@serve.deployment\ndef generate(request):\n    return generator(request.query_params['query'])\n\n"
            "app = generate.bind()\n",
            "a function deployment that uses a model loaded once at import",
        ),
        Valid(
            "import pandas as pd\nfrom ray import serve\n\n@serve.deployment\ndef summarize(request):\n"
            "    table = pd.read_csv(request.query_params['url'])\n    return table.describe().to_json()\n\n"
            "app = summarize.bind()\n",
            "a function deployment that reads the file the request names: the work, not set-up",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\nfrom transformers import VideoMAEImageProcessor\n\nlast_good_row = None\n\ndef preprocess(row):\n"
            "    global last_good_row\n    processor = VideoMAEImageProcessor.from_pretrained('MCG-NJU/videomae-base')\n"
            "    row['video'] = processor(row['frames'])\n    last_good_row = row\n    return row\n\n"
            "ds = ray.data.read_binary_files('videos/').map(preprocess)\n",
            13,
            note="a `global` that keeps something else: the processor is still loaded per row",
        ),
        Invalid(
            "import ray\nfrom transformers import AutoModel\n\ndef embed(batch):\n"
            "    model = AutoModel.from_pretrained('bert-base-uncased')\n    return model(batch)\n\n"
            "ds = ray.data.read_parquet('s3://b/t').map_batches(embed, batch_size=32)\n",
            8,
        ),
        Invalid(
            "import ray\nimport torch\n\ndef load_model():\n    return torch.jit.load('model.pt')\n\ndef predict(batch):\n"
            "    model = load_model()\n    batch['y'] = model(batch['x'])\n    return batch\n\n"
            "ds = ray.data.range(100)\nds = ds.map_batches(predict)\n",
            13,
            note="through a helper of the module",
        ),
        Invalid(
            "import ray\nimport boto3\n\ndef upload(row):\n    s3 = boto3.client('s3')\n    s3.put_object(Bucket='b', Key=row['id'], Body=b'')\n"
            "    return row\n\nray.data.range(10).map(upload).materialize()\n",
            9,
            note="a client per row",
        ),
        Invalid(
            "import functools\nimport pickle\nimport ray.data\n\ndef score(batch, threshold):\n"
            "    with open('model.pkl', 'rb') as f:\n        model = pickle.load(f)\n    return model.predict(batch) > threshold\n\n"
            "ds = ray.data.read_csv('x.csv').map_batches(functools.partial(score, threshold=0.5))\n",
            10,
            note="`functools.partial` of the function; the file does not come from the batch",
        ),
        Invalid(
            "from ray import data\nfrom transformers import pipeline\n\ndef keep(row):\n"
            "    return pipeline('text-classification')(row['text'])[0]['label'] == 'POSITIVE'\n\n"
            "ds = data.read_json('in.json').filter(keep)\n",
            7,
            note="a filter",
        ),
        Invalid(
            "import ray\nimport onnxruntime as ort\n\nds = ray.data.range(10)\n"
            "ds = ds.map_batches(lambda b: {'y': ort.InferenceSession('m.onnx').run(None, {'x': b['id']})[0]})\n",
            5,
            note="a lambda",
        ),
        Invalid(
            "from ray import serve\nfrom transformers import pipeline\n\n@serve.deployment\ndef model(request):\n"
            "    language_model = pipeline('text-generation', model='gpt2')\n"
            "    return language_model(request.query_params['query'], max_length=100)\n\nserve.run(model.bind())\n",
            6,
            note="a function Serve deployment: the body runs per request",
        ),
        Invalid(
            "import torch\nfrom ray import serve\n\ndef load_model():\n    return torch.jit.load('model.pt')\n\n"
            "async def predict(request):\n    model = load_model()\n    return model(torch.tensor(await request.json())).tolist()\n\n"
            "app = serve.deployment(predict).bind()\n",
            8,
            note="`serve.deployment(f)`, through a helper of the module",
        ),
    ]

    def wants(self, text: str) -> bool:
        """The pre-filter (a Ray Data UDF call, or a Serve deployment), plus a word of one of the set-up calls."""
        udf_or_deployment = super().wants(text) or (
            any(token in text for token in DEPLOYMENT_TOKENS) and any(token in text for token in SERVE_TOKENS)
        )
        return udf_or_deployment and any(token in text for token in SETUP_TOKENS)

    def check(self, ctx: Context) -> None:
        model = ctx.model
        setups = model.analysis(_Setups)
        for site, method in model.analysis(DatasetFacts).calls(UDF_METHODS):
            target = udf_of(site.node)
            if target is None:
                continue
            if isinstance(target, cst.Lambda):
                found, name = setups.of(target), "A lambda"
            else:
                udf = defined_function_or_class(model, target, site.scope, site.index)
                if not isinstance(udf, FunctionInfo) or udf.owner is not None:
                    continue
                found, name = setups.of(udf.node), f"`{udf.node.name.value}`"
            if found is None:
                continue
            unit = "batch" if method == "map_batches" else "row"
            ctx.report(site.node, f"{name} calls {found[0]} per {unit}: do it once in a callable class", facts=SetupFacts(serve=False))
        for deployment in model.analysis(ServeFacts).deployments.values():
            if not isinstance(deployment.node, cst.FunctionDef):
                continue  # a class deployment: its `__init__` runs once per replica
            found = setups.of(deployment.node)
            if found is not None:
                ctx.report(
                    found[1],
                    f"Serve deployment `{deployment.name}` runs {found[0]} per request: use a class `__init__`",
                    facts=SetupFacts(serve=True),
                )
