"""RAY222 serve-blocking-call-in-async: `time.sleep`, synchronous HTTP or subprocess calls in an async Serve method."""

from __future__ import annotations

import libcst as cst

from ray_lint.analyses.event_loop import may_stall, stall_message, stalls
from ray_lint.blocking_calls import sleep_fix
from ray_lint.diagnostics import Severity
from ray_lint.experiment import (
    MOST_AT_ONCE,
    AsyncActorExperiment,
    Plan,
    Subject,
    Variant,
    script,
    timed_forms,
)
from ray_lint.libraries import SERVE_TOKENS
from ray_lint.libraries.serve import ServeFacts
from ray_lint.rule import Context, Invalid, Rule, Valid


# A deployment whose async method records the span of each call, so that the replica itself says how
# many requests it ran at once (`MOST_AT_ONCE`): Ray's timeline shows the replica actor's calls, not
# the requests its event loop interleaves.
class BlockingServeMethodExperiment(AsyncActorExperiment[None]):
    """Concurrent requests through a `DeploymentHandle` to a replica whose async method blocks in
    `time.sleep` (standing for any blocking call), against the same method awaiting `asyncio.sleep`.
    One program runs both (`Plan.joint`): Serve starts once (without an HTTP proxy), both forms are
    deployed as apps of their own and answer a first request before the clock starts, and Serve is
    shut down after both are timed. Serve's start and shutdown take most of a run."""

    facts_type = type(None)
    REQUESTS = 20
    WAIT_SECONDS = 0.1

    def plan(self, subject: Subject) -> Plan:
        blocking = _SCORER.format(form="Blocking", wait=f"time.sleep({self.WAIT_SECONDS})")
        awaiting = _SCORER.format(form="Awaiting", wait=f"await asyncio.sleep({self.WAIT_SECONDS})")
        deploy = (
            "serve.start(proxy_location='Disabled')\n"
            + "".join(
                f"{side} = serve.run({form}Scorer.bind(), name='ray_lint_RAY222_{side}', route_prefix=None)\n"
                f"{side}.score.remote(-1).result(timeout_s=30)  # the replica up before the clock starts\n"
                for side, form in (("a", "Blocking"), ("b", "Awaiting"))
            )
        )
        requests = f"return [r.result(timeout_s=30) for r in [{{side}}.score.remote(i) for i in range({self.REQUESTS})]]"
        counts = (
            "__ray_lint_evidence__ = {side: {'at_once': handle.most_at_once.remote().result(timeout_s=30)} "
            "for side, handle in (('a', a), ('b', b))}\nserve.shutdown()\n"
        )
        joint = _HEADER + blocking + awaiting + deploy + timed_forms(requests.format(side="a"), requests.format(side="b")) + counts
        return Plan(
            Variant("blocking call", ""),  # the forms' names: the joint program runs them
            Variant("await", ""),
            "modelled",
            f"{self.REQUESTS} concurrent requests through a DeploymentHandle to an async Serve method, "
            f"each waiting {self.WAIT_SECONDS:g} s",
            joint=Variant("both forms in one Serve instance", script(joint)),
        )


_HEADER = "import asyncio\n\nfrom ray import serve\n\n"
_SCORER = (
    "@serve.deployment(max_ongoing_requests=32, ray_actor_options={{'num_cpus': 0}})\n"
    "class {form}Scorer:\n    def __init__(self):\n        self.spans = []\n\n"
    "    async def score(self, x):\n        start = time.time()\n"
    "        {wait}  # stands for a call to a feature store\n"
    "        self.spans.append((start, time.time()))\n        return x\n\n"
    + MOST_AT_ONCE.replace("{", "{{").replace("}", "}}")
    + "\n"
)


class ServeBlockingCallInAsync(Rule):
    code = "RAY222"
    name = "serve-blocking-call-in-async"
    message = "A blocking call in an async Serve method stalls every request to the replica"
    severity = Severity.WARNING
    category = "perf"
    fixable = True
    tokens = ("async def",)
    also_tokens = SERVE_TOKENS
    anchor_tokens = ("deployment",)
    experiment = BlockingServeMethodExperiment()
    docs = """
## What it does
Finds, in an `async def` method of a `@serve.deployment` class (or in an async function
deployment), a call that holds the replica's event loop:
- a known blocking function: `time.sleep`; synchronous HTTP (`requests.*`, `httpx.get`/`post`/...,
  `urllib.request.urlopen`, `urllib3.request`, the `wikipedia` client); subprocesses
  (`subprocess.run`/`call`/`check_call`/`check_output`/`getoutput`/`getstatusoutput`, `os.system`,
  `os.wait*`); blocking name resolution and connects (`socket.create_connection`,
  `socket.getaddrinfo`, `socket.gethostbyname*`). Names are resolved through imports and aliases.
  The table is RAY007's (async actor methods), and so is what it leaves out: a quick query of the
  machine such as `subprocess.run(["nvidia-smi", "-L"])`;
- the blocking twin of an async API: a public `*_sync` method of another object, such as the
  `enqueue_task_sync` and `get_task_status_sync` of Serve's task-processor adapters, which also
  offer `enqueue_task_async` and `get_task_status_async`;
- a neural network's inference, on an attribute that holds one loaded in the class
  (`self.model = AutoModelForCausalLM.from_pretrained(...)`, `transformers.pipeline(...)`,
  `torch.hub.load(...)`, `SentenceTransformer(...)`, `whisper.load_model(...)`, `vllm.LLM(...)`,
  `ultralytics.YOLO(...)`, `timm.create_model(...)`, faster-whisper's `WhisperModel(...)`, an ONNX
  Runtime `InferenceSession(...)`, llama.cpp's `Llama(...)` or LangChain's `LlamaCpp(...)`, a Keras application such as
  `MobileNetV2(weights="imagenet")`, a `torchvision.models` builder such as `resnet50(...)`,
  `SomeModel.load(...)`, followed through `.to(device)`, `.eval()`, wrappers such as
  `torch.compile(model)` and methods of the class that return one,
  `self.pipe = self._load_pipeline()`): a call of the attribute,
  or its `generate`, `predict`, `predict_proba`, `forward`, `encode`, `transcribe`, `infer`,
  `run`, `invoke`, `create_completion`, `create_chat_completion` or `select_action` (a LeRobot policy);
- any of those in an `async def` nested in the method (the async generator that a
  `StreamingResponse` iterates runs on the replica's loop too);
- a call of a synchronous helper that does one of those whenever it runs: a function of the
  module (`fetch_page(term)`) or a method of the same class (`self.generate(text)`), followed two
  calls deep. The message names the helper and the line where the blocking happens. A generator
  helper runs only as it is iterated: its call counts where the coroutine iterates it (`for`,
  `list(...)`, `sum(...)`), not where it is handed to a `StreamingResponse`, which iterates a
  synchronous generator in a worker thread.

## Why is this bad?
A Serve replica runs the async methods of its deployment as coroutines on one event loop, up
to `max_ongoing_requests` at a time, switching between them only at an `await`. A blocking call
holds the loop's thread, so every other request to the replica waits for it: the replica serves
requests one at a time and its latency grows with the queue. Measured on a 2-core machine with
Ray 2.60: 20 concurrent requests through a `DeploymentHandle` to a method that
`time.sleep(0.1)`s take 2.03 s; with `await asyncio.sleep(0.1)` they take 0.14 s.

A forward pass of a language, vision or diffusion model takes tens of milliseconds to seconds, and
the replica can neither accept nor answer another request meanwhile, not even a health check.

`ray.get` and `ray.wait` in a coroutine are reported by RAY006, not here (also when a `*_sync`
client method blocks on them). ray-lint is silent for:
- sync (`def`) methods of a deployment: Serve 2.60 runs them in a thread pool
  (`RAY_SERVE_RUN_SYNC_IN_THREADPOOL=1`, the default), sized by `max_ongoing_requests`, so a
  blocking call there holds one thread, not the loop. With `RAY_SERVE_RUN_SYNC_IN_THREADPOOL=0`
  Serve runs them on the loop and warns once;
- a blocking function handed to a worker thread (`await asyncio.to_thread(time.sleep, 1)`,
  `loop.run_in_executor(None, lambda: requests.get(url))`), or called in a nested plain `def`;
- `time.sleep(0)`;
- `async def` functions that are not methods of a deployment (RAY007 covers async actors);
- calls on objects (`session.get(...)`, `proc.wait()`): their type is unknown;
- inference in a `@serve.batch` handler, Serve's documented place for it (one call serves a
  whole batch), and inference of classic models (XGBoost, scikit-learn through MLflow or joblib,
  Keras or TorchScript files of unknown size), which may take a millisecond;
- helpers in other modules, and a call in an `except` block (a fallback) or awaited.

## Example
```python
@serve.deployment
class Recommender:
    async def __call__(self, request):
        user = (await request.json())["user"]
        features = requests.get(f"{FEATURE_STORE}/users/{user}").json()
        time.sleep(0.05)  # rate limit
        return self.model.predict(features)
```

## Use instead
```python
@serve.deployment
class Recommender:
    async def __call__(self, request):
        user = (await request.json())["user"]
        async with httpx.AsyncClient() as client:
            features = (await client.get(f"{FEATURE_STORE}/users/{user}")).json()
        await asyncio.sleep(0.05)  # rate limit
        return self.model.predict(features)
```
Or make the method a plain `def`: Serve then runs it in its thread pool.

## Fix safety
The fix, offered for a `time.sleep(...)` statement of the method itself, replaces it with
`await asyncio.sleep(...)` and adds `import asyncio` when it is not imported (in place of
`import time` when the sleep was its only use). It is unsafe: other requests now run during the
pause, which is the point, but their side effects on the replica's state can interleave with
this one's. Other blocking calls have no fix: the async replacement depends on the library. For inference,
make the method a plain `def` (Serve runs it in its thread pool), or
`await asyncio.to_thread(self.generate, text)`, or batch it with `@serve.batch`.

## References
- [Serve performance tuning: blocking the event loop](https://docs.ray.io/en/latest/serve/advanced-guides/performance.html)
- [Dynamic request batching and async methods](https://docs.ray.io/en/latest/serve/advanced-guides/dyn-req-batch.html)
"""

    VALID = [
        Valid(
            "from ray import serve\nfrom transformers import AutoModel, AutoTokenizer\n\n@serve.deployment\nclass Embedder:\n"
            "    def __init__(self, name, remote):\n        self.tokenizer = self._tokenizer(name)\n        self.backend = self._backend(name, remote)\n\n"
            "    def _tokenizer(self, name):\n        return AutoTokenizer.from_pretrained(name)\n\n"
            "    def _backend(self, name, remote):\n        if remote:\n            return RemoteClient(name)\n"
            "        return AutoModel.from_pretrained(name)\n\n"
            "    async def __call__(self, text):\n        ids = self.tokenizer(text)\n        return self.backend(ids)\n",
            "methods that return a tokenizer, or a model on one path and a client on another: not a model each",
        ),
        Valid(
            "import asyncio\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, x):\n"
            "        await asyncio.sleep(0.1)\n        return x\n",
            "an awaited sleep",
        ),
        Valid(
            "import time\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    def __call__(self, x):\n"
            "        time.sleep(0.1)\n        return x\n",
            "a sync method: Serve 2.60 runs it in a thread pool",
        ),
        Valid(
            "import asyncio\nimport requests\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n"
            "    async def __call__(self, url):\n        response = await asyncio.to_thread(requests.get, url)\n"
            "        return response.json()\n",
            "the blocking function runs in a worker thread",
        ),
        Valid(
            "import asyncio\nimport subprocess\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n"
            "    async def __call__(self, cmd):\n        loop = asyncio.get_running_loop()\n"
            "        return await loop.run_in_executor(None, lambda: subprocess.run(cmd))\n",
            "a lambda run by an executor",
        ),
        Valid(
            "import time\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, x):\n"
            "        time.sleep(0)\n        return x\n",
            "time.sleep(0) only yields the thread",
        ),
        Valid(
            "import time\nfrom ray import serve\n\nclass Client:\n    async def call(self, handle):\n"
            "        time.sleep(1)\n        return await handle.remote()\n",
            "an async method of a class that is not a deployment",
        ),
        Valid(
            "import ray\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, ref):\n"
            "        return ray.get(ref)\n",
            "ray.get is RAY006's",
        ),
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, session, url):\n"
            "        return session.get(url)\n",
            "a call on an object of unknown type",
        ),
        Valid(
            "from ray import serve\nfrom transformers import pipeline\n\n@serve.deployment\nclass Summarizer:\n"
            "    def __init__(self):\n        self.pipe = pipeline('summarization')\n\n"
            "    @serve.batch(max_batch_size=8)\n    async def __call__(self, texts):\n        return self.pipe(texts)\n",
            "inference in a @serve.batch handler: Serve's documented pattern",
        ),
        Valid(
            "import asyncio\nfrom ray import serve\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
            "@serve.deployment\nclass Chat:\n    def __init__(self, name):\n"
            "        self.tokenizer = AutoTokenizer.from_pretrained(name)\n"
            "        self.model = AutoModelForCausalLM.from_pretrained(name)\n\n"
            "    def generate(self, text):\n        return self.model.generate(**self.tokenizer(text, return_tensors='pt'))\n\n"
            "    async def __call__(self, request):\n        text = await request.json()\n"
            "        ids = self.tokenizer(text)\n        return await asyncio.to_thread(self.generate, text)\n",
            "a tokenizer call, and the inference helper handed to a thread",
        ),
        Valid(
            "import xgboost as xgb\nfrom ray import serve\n\n@serve.deployment\nclass Fraud:\n"
            "    def __init__(self, path):\n        self.booster = xgb.Booster(model_file=path)\n\n"
            "    async def __call__(self, request):\n        return self.booster.predict(await request.json())\n",
            "a classic model's prediction can take a millisecond",
        ),
        Valid(
            "import requests\nfrom ray import serve\n\ndef fetch(url):\n    try:\n        return CACHE[url]\n"
            "    except KeyError:\n        return requests.get(url).text\n\n@serve.deployment\nclass Api:\n"
            "    async def __call__(self, request):\n        return fetch(await request.json())\n",
            "the helper blocks only in its `except` fallback",
        ),
        Valid(
            "from ray import serve\n\n@serve.deployment\nclass Trainer:\n"
            "    async def push(self, client):\n        with self._disabled_for_sync():\n"
            "            await client.send()\n",
            "a private method of self whose name ends in _sync is not an API's blocking twin",
        ),
        Valid(
            "import time\nfrom ray import serve\nfrom starlette.responses import StreamingResponse\n\n@serve.deployment\n"
            "class Streamer:\n    def numbers(self, count):\n        for i in range(count):\n            yield str(i)\n"
            "            time.sleep(0.1)\n\n    async def __call__(self, request):\n"
            "        return StreamingResponse(self.numbers(10), media_type='text/plain')\n",
            "a generator's call runs none of its body: Starlette iterates a sync generator in a worker thread",
        ),
        Valid(
            "import asyncio\nimport time\nfrom ray import serve\nfrom starlette.responses import StreamingResponse\n\n@serve.deployment\nclass Chat:\n"
            "    async def __call__(self, request):\n        async def chunks():\n            for i in range(10):\n"
            "                await asyncio.sleep(0.1)\n                yield f'data: {i}\\n\\n'\n\n"
            "        def pace():\n            time.sleep(0.1)\n\n"
            "        await asyncio.to_thread(pace)\n        return StreamingResponse(chunks(), media_type='text/event-stream')\n",
            "the nested async generator awaits its pauses; a nested plain function runs in a worker thread",
        ),
        Valid(
            "import asyncio\nfrom llama_cpp import Llama\nfrom ray import serve\n\n@serve.deployment\nclass Chat:\n"
            "    def __init__(self, path):\n        self.llm = Llama(model_path=path)\n\n"
            "    async def __call__(self, prompt):\n        return await asyncio.to_thread(self.llm.create_completion, prompt)\n",
            "llama.cpp's completion handed to a worker thread",
        ),
    ]
    INVALID = [
        Invalid(
            "from ray import serve\nfrom transformers import pipeline\n\n@serve.deployment\nclass Classifier:\n"
            "    def __init__(self):\n        self.pipe = self._load()\n\n    def _load(self):\n"
            "        return pipeline('zero-shot-image-classification', model='openai/clip-vit-base-patch32')\n\n"
            "    async def __call__(self, request):\n        return self.pipe(await request.body())\n",
            13,
            note="the model comes from a method of the class that returns it",
        ),
        Invalid(
            "from faster_whisper import WhisperModel\nfrom ray import serve\n\n@serve.deployment(ray_actor_options={'num_gpus': 1})\n"
            "class ASR:\n    def __init__(self):\n        self.model = WhisperModel('large-v3', device='cuda')\n\n"
            "    async def transcribe(self, path):\n        segments, info = self.model.transcribe(path)\n"
            "        return [s.text for s in segments]\n",
            10,
            note="faster-whisper's model",
        ),
        Invalid(
            "import torch\nfrom lerobot.policies.pi0.modeling_pi0 import PI0Policy\nfrom ray import serve\n\n"
            "@serve.deployment(ray_actor_options={'num_gpus': 1})\nclass Policy:\n    def __init__(self):\n"
            "        self.policy = PI0Policy.from_pretrained('lerobot/pi0_libero_base').to('cuda').eval()\n\n"
            "    async def predict(self, batch):\n        with torch.no_grad():\n"
            "            action = self.policy.select_action(batch)\n        return action.cpu().numpy()\n",
            12,
            note="a LeRobot policy's `select_action`: its forward pass",
        ),
        Invalid(
            "import onnxruntime as ort\nfrom ray import serve\n\n@serve.deployment\nclass LangId:\n    def __init__(self, path):\n"
            "        self.session = ort.InferenceSession(path, providers=['CPUExecutionProvider'])\n\n"
            "    async def detect(self, features):\n        name = self.session.get_inputs()[0].name\n"
            "        return self.session.run(None, {name: features})[0]\n",
            11,
            note="an ONNX Runtime session's `run`",
        ),
        Invalid(
            "import time\nfrom ray import serve\nfrom starlette.responses import StreamingResponse\n\n@serve.deployment\nclass Chat:\n"
            "    async def __call__(self, request):\n        async def chunks():\n            for i in range(10):\n"
            "                time.sleep(0.1)\n                yield f'data: {i}\\n\\n'\n\n"
            "        return StreamingResponse(chunks(), media_type='text/event-stream')\n",
            10,
            note="in the async generator a streaming response iterates on the replica's loop",
        ),
        Invalid(
            "from langchain_community.llms import LlamaCpp\nfrom ray import serve\n\n@serve.deployment\nclass Chat:\n"
            "    def __init__(self, path):\n        self.llm = LlamaCpp(model_path=path, n_ctx=4096)\n\n"
            "    async def __call__(self, request):\n        prompt = (await request.json())['text']\n"
            "        return {'response': self.llm(prompt)}\n",
            11,
            note="a local llama.cpp model through LangChain, called on the event loop",
        ),
        Invalid(
            "import time\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, x):\n"
            "        time.sleep(0.1)\n        return x\n",
            7,
            fixed="import asyncio\nfrom ray import serve\n\n@serve.deployment\nclass Model:\n    async def __call__(self, x):\n"
            "        await asyncio.sleep(0.1)\n        return x\n",
            note="asyncio is imported by the fix, in place of `time`, whose only use was the sleep",
        ),
        Invalid(
            "import requests\nfrom ray import serve\n\n@serve.deployment(num_replicas=2)\nclass Enricher:\n"
            "    async def enrich(self, user):\n        return requests.get(f'http://features/{user}').json()\n",
            7,
            note="synchronous HTTP; no fix",
        ),
        Invalid(
            "import subprocess as sp\nimport ray.serve\n\n@ray.serve.deployment\nasync def render(request):\n"
            "    return sp.check_output(['convert', 'in.png', 'out.jpg'])\n",
            6,
            note="an async function deployment; an aliased import",
        ),
        Invalid(
            "from time import sleep\nfrom ray import serve\n\nclass Poller:\n    async def poll(self):\n"
            "        for _ in range(3):\n            sleep(0.5)\n\nPollerDeployment = serve.deployment(Poller)\n",
            7,
            note="`from time import sleep`, replaced by the fix's import; a class made a deployment with serve.deployment(Cls)",
            fixed="import asyncio\nfrom ray import serve\n\nclass Poller:\n    async def poll(self):\n"
            "        for _ in range(3):\n            await asyncio.sleep(0.5)\n\nPollerDeployment = serve.deployment(Poller)\n",
        ),
        Invalid(
            "from urllib.request import urlopen\nfrom fastapi import FastAPI\nfrom ray import serve\n\napp = FastAPI()\n\n"
            "@serve.deployment\n@serve.ingress(app)\nclass Api:\n    @app.get('/health')\n    async def health(self):\n"
            "        with urlopen('http://localhost:9000/ping') as reply:\n            return reply.status\n",
            12,
            note="a FastAPI ingress endpoint",
        ),
        Invalid(
            "from ray import serve\nfrom transformers import AutoModelForCausalLM\n\n@serve.deployment(ray_actor_options={'num_gpus': 1})\n"
            "class Generator:\n    def __init__(self, name):\n"
            "        self.model = AutoModelForCausalLM.from_pretrained(name).to('cuda').eval()\n\n"
            "    def generate(self, ids):\n        return self.model.generate(ids, max_new_tokens=100)\n\n"
            "    async def __call__(self, request):\n        return self.generate(await request.json())\n",
            13,
            note="inference in a sync helper of the same class, reported at the call in the coroutine",
        ),
        Invalid(
            "import requests\nfrom ray import serve\n\ndef fetch_page(term):\n"
            "    return requests.get(f'https://en.wikipedia.org/wiki/{term}').text\n\n"
            "@serve.deployment\nclass Driver:\n    async def summarize(self, term):\n        page = fetch_page(term)\n"
            "        return await self.summarizer.remote(page)\n",
            10,
            note="a module function that makes a blocking call",
        ),
        Invalid(
            "from diffusers import StableDiffusionXLPipeline\nfrom ray import serve\n\n@serve.deployment\nclass Painter:\n"
            "    def __init__(self):\n        self.pipe = StableDiffusionXLPipeline.from_pretrained('sdxl')\n\n"
            "    async def generate(self, prompt):\n        return self.pipe(prompt).images[0]\n",
            10,
            note="a diffusion pipeline run on the event loop",
        ),
        Invalid(
            "from ray import serve\nfrom ray.serve.task_consumer import instantiate_adapter_from_config\n\n@serve.deployment\nclass Api:\n"
            "    def __init__(self, config):\n        self.adapter = instantiate_adapter_from_config(config)\n\n"
            "    async def submit(self, payload):\n        return self.adapter.enqueue_task_sync('process', args=[payload]).id\n",
            10,
            note="the blocking twin of enqueue_task_async",
        ),
        Invalid(
            "import time\nfrom ray import serve\n\n@serve.deployment\nclass Poller:\n    def readings(self, count):\n"
            "        for i in range(count):\n            time.sleep(0.5)\n            yield i\n\n"
            "    async def __call__(self, request):\n        return sum(self.readings(4))\n",
            12,
            note="a generator helper that the coroutine iterates there and then",
        ),
        Invalid(
            "from ray import serve\nfrom tensorflow.keras.applications.mobilenet_v2 import MobileNetV2\n\n"
            "@serve.deployment\nclass Classifier:\n    def __init__(self):\n"
            "        self.model = MobileNetV2(weights='imagenet')\n\n"
            "    async def __call__(self, pixels):\n        return self.model.predict(pixels)\n",
            10,
            note="a Keras application: a vision network",
        ),
    ]

    def wants(self, text: str) -> bool:
        """The pre-filter, plus something that can stall an event loop (`event_loop.may_stall`)."""
        return super().wants(text) and may_stall(text)

    def check(self, ctx: Context) -> None:
        model = ctx.model
        serve = model.analysis(ServeFacts)
        for deployment in serve.deployments.values():
            node = deployment.node
            if isinstance(node, cst.ClassDef):
                cls = model.class_info(node)
                methods = [m for m in cls.methods if m.is_async] if cls is not None else []
            else:
                info = model.function_info(node)
                methods = [info] if info is not None and info.is_async else []
            for method in methods:
                kind = "async Serve method" if method.owner is not None else "async Serve deployment"
                name = f"`{deployment.name}.{method.node.name.value}`" if method.owner is not None else f"`{deployment.name}`"
                for stall in stalls(model, method, inference=not serve.is_batched(method)):
                    fix = sleep_fix(ctx, stall.site, method) if stall.helper is None and stall.name == "time.sleep" else None
                    ctx.report(stall.site.node, stall_message(ctx, stall, kind, name, "the replica's event loop"), fix=fix)
