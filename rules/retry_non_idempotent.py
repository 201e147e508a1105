"""RAY074 retry-non-idempotent: a task or actor method that Ray may run again performs a write that must happen once."""

from __future__ import annotations

import re

import libcst as cst

from ray_lint.diagnostics import Severity
from ray_lint.experiment import Plan, ReproductionExperiment, Subject, Variant, script
from ray_lint.model import RemoteDef, RemoteOptions, SemanticModel
from ray_lint.python_model import CallSite, FunctionInfo, iter_subtree, literal_number, literal_string
from ray_lint.rule import REMOTE_MADE, Context, Invalid, Option, Rule, Valid

# SQL that adds rows or increments a value: running it twice changes the result.
_INSERT = re.compile(r"^\s*(?:--[^\n]*\n\s*)*INSERT\b", re.IGNORECASE)
_UPSERT = re.compile(r"\bON\s+CONFLICT\b|\bON\s+DUPLICATE\s+KEY\b|\bINSERT\s+OR\s+(?:REPLACE|IGNORE)\b|\bINSERT\s+IGNORE\b", re.IGNORECASE)
_INCREMENT = re.compile(r"^\s*UPDATE\b.*\bSET\b.*?\b(\w+)\s*=\s*\1\s*[-+]", re.IGNORECASE | re.DOTALL)
SQL_METHODS = frozenset({"execute", "executemany"})
# Method names that send a message or push a record: each call is one more message.
MESSAGE_METHODS = {
    "sendmail": "sends an email",
    "send_message": "sends a message",
    "send_email": "sends an email",
    "send_raw_email": "sends an email",
    "send_message_batch": "sends messages",
    "chat_postMessage": "posts a chat message",
    "put_record": "pushes a stream record",
    "put_records": "pushes stream records",
}
# Redis commands that change a value relative to what it was.
COUNTER_METHODS = frozenset({"incr", "incrby", "incrbyfloat", "hincrby", "hincrbyfloat", "zincrby", "decr", "decrby", "lpush", "rpush", "xadd"})
HTTP_POSTS = frozenset({"requests.post", "requests.patch", "httpx.post", "httpx.patch"})
HTTP_REQUESTS = frozenset({"requests.request", "httpx.request"})
HTTP_SESSIONS = frozenset({"requests.Session", "requests.session", "requests.sessions.Session", "httpx.Client"})


# A task that inserts an order into a SQLite table and then raises, the first time only (as a notification
# that fails after the write); `retry_exceptions=True` runs it again. `{table}` and `{insert}` are the
# schema and the write.
RETRIED_WRITE_MODEL = """\
import sqlite3
import tempfile

folder = tempfile.mkdtemp()
database, failed_once = os.path.join(folder, "orders.db"), os.path.join(folder, "failed-once")
with sqlite3.connect(database) as connection:
    connection.execute("{table}")

@ray.remote(retry_exceptions=True, max_retries=1)
def record_order(order_id, total):
    with sqlite3.connect(database) as connection:
        connection.execute("{insert}", (order_id, total))
    if not os.path.exists(failed_once):
        open(failed_once, "w").close()
        raise ConnectionError("the customer notification failed after the insert")

ray.get(record_order.remote(1, 9.5))
with sqlite3.connect(database) as connection:
    rows = connection.execute("SELECT COUNT(*) FROM orders WHERE id = 1").fetchone()[0]
if rows > 1:
    __ray_lint_evidence__ = {{"wrong": (
        f"the task inserted order 1, then raised, and Ray ran it again: the table holds {{rows}} rows for the one order"
    )}}
else:
    __ray_lint_evidence__ = {{"right": f"after the retry the table holds {{rows}} row for the order"}}
"""


class RetriedWriteExperiment(ReproductionExperiment[None]):
    """Runs the retry: a task that inserts a row into a SQLite table and then raises the first time,
    with `retry_exceptions=True`, against the same task with an idempotent write (a key and `ON CONFLICT
    DO NOTHING`). The model stands for the flagged write, whichever it is, and for whatever makes Ray run
    the task again (an exception, a dead worker)."""

    facts_type = type(None)
    shares_driver = True

    def model(self, subject: Subject) -> Plan:
        plain = RETRIED_WRITE_MODEL.format(
            table="CREATE TABLE orders (id INTEGER, total REAL)", insert="INSERT INTO orders (id, total) VALUES (?, ?)",
        )
        idempotent = RETRIED_WRITE_MODEL.format(
            table="CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)",
            insert="INSERT INTO orders (id, total) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
        )
        return Plan(
            Variant("plain insert", script(plain)),
            Variant("idempotent insert", script(idempotent)),
            "modelled",
            "a task with retry_exceptions=True inserts a row into SQLite, then raises once",
        )


class RetryNonIdempotent(Rule):
    code = "RAY074"
    name = "retry-non-idempotent"
    message = "A task or actor method that Ray retries performs a write that is not idempotent"
    severity = Severity.WARNING
    category = "correctness"
    preview = True
    tokens = ("execute", "send", "put_record", "chat_postMessage", "incr", "decr", "push", "xadd")
    also_tokens = REMOTE_MADE
    experiment = RetriedWriteExperiment()
    options = (
        Option(
            "include-default-retries",
            False,
            "Also report tasks that keep Ray's default `max_retries=3` (retried when their worker or node dies).",
        ),
        Option(
            "include-http-post",
            False,
            "Also report HTTP POST and PATCH requests (`requests.post`, `httpx.post`, a session's `.post`): "
            "most are queries, such as model inference, that are safe to repeat.",
        ),
    )
    docs = """
## What it does
Finds a remote function or actor method that Ray is configured to run again, and whose own body
performs a write that adds something each time it runs:
- SQL that inserts rows (`cursor.execute("INSERT ...")`, not an upsert) or increments a column
  (`UPDATE t SET n = n + 1`), given as a literal, a name bound to one, or `text("...")`;
- a message: `sendmail`, `send_message`, `send_email`, `chat_postMessage`, `put_record`;
- a Redis counter or list push: `incr`, `incrby`, `hincrby`, `lpush`, `rpush`, `xadd`;
- with the option `include-http-post`, an HTTP POST or PATCH.

Retries count when the module shows them: a task with `retry_exceptions=True` (or a list of
exceptions) or an explicit `max_retries` other than 0; an actor method with `max_task_retries`
other than 0 (from the class or `@ray.method`) and either `retry_exceptions` or `max_restarts`
other than 0. With the option `include-default-retries`, also a task that keeps the default.

## Why is this bad?
Ray retries tasks when the worker or node dies (`max_retries`, 3 by default) and, with
`retry_exceptions`, when the task raises. A retry runs the whole function again, including the
part that already succeeded, so a row inserted before the failure is inserted twice, an email is
sent twice, a counter counts twice. Ray's fault-tolerance guide asks for idempotent tasks and for
exception retries only on idempotent actor methods, and its out-of-memory guide warns that tasks
killed by the memory monitor are retried indefinitely unless `max_retries=0`. Ray Data itself
asks for `max_retries=0` on BigQuery writes for this reason.

The rule is in preview: it sees only the writes listed above, written in the remote body itself
(not in the helpers it calls), and it cannot know whether the target deduplicates (a unique key,
an idempotency token), which makes a retry harmless.

ray-lint is silent for:
- upserts (`ON CONFLICT`, `ON DUPLICATE KEY`, `INSERT OR REPLACE`), and writes that overwrite
  (`put_object`, `UPDATE ... SET x = 5`, `DELETE`, HTTP PUT and DELETE);
- tasks whose retries are off anywhere in the module (`max_retries=0`), or whose options are not
  literal or come from `**kwargs`;
- actor methods without `max_task_retries` (actor tasks are not retried by default).

## Example
```python
@ray.remote(retry_exceptions=True)
def record_order(order):
    with connect() as conn:
        conn.execute("INSERT INTO orders (id, total) VALUES (?, ?)", (order.id, order.total))
        notify_customer(order)  # may raise after the insert
```

## Use instead
An idempotent write, so that a retry does no harm:
```python
@ray.remote(retry_exceptions=True)
def record_order(order):
    with connect() as conn:
        conn.execute(
            "INSERT INTO orders (id, total) VALUES (?, ?) ON CONFLICT (id) DO NOTHING",
            (order.id, order.total),
        )
```
or no retries: `@ray.remote(max_retries=0)`.

## Fix safety
There is no automatic fix: making a write idempotent needs a key only the author knows, and
turning retries off changes fault tolerance.

## Options
- `include-default-retries`: also report tasks that keep the default `max_retries=3`.
- `include-http-post`: also report HTTP POST and PATCH requests.

## References
- [Fault tolerance: task retries](https://docs.ray.io/en/latest/ray-core/fault_tolerance/tasks.html)
- [Fault tolerance: actor task retries](https://docs.ray.io/en/latest/ray-core/fault_tolerance/actors.html)
- [Out-of-memory prevention: retry policy](https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html)
"""

    VALID = [
        Valid(
            "import ray\n\n@ray.remote(retry_exceptions=True)\ndef save(conn, row):\n"
            "    conn.execute('INSERT INTO t (id, v) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET v = excluded.v', row)\n",
            "an upsert is idempotent",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_retries=0)\ndef save(conn, row):\n    conn.execute('INSERT INTO t VALUES (?, ?)', row)\n",
            "retries off",
        ),
        Valid(
            "import ray\n\n@ray.remote\ndef save(conn, row):\n    conn.execute('INSERT INTO t VALUES (?, ?)', row)\n",
            "default retries only (reported with include-default-retries)",
        ),
        Valid(
            "import boto3\nimport ray\n\n@ray.remote(retry_exceptions=True)\ndef upload(key, body):\n"
            "    boto3.client('s3').put_object(Bucket='b', Key=key, Body=body)\n",
            "put_object overwrites: idempotent",
        ),
        Valid(
            "import ray\n\n@ray.remote(max_retries=5)\ndef mark_done(conn, job_id):\n"
            "    conn.execute('UPDATE jobs SET status = ? WHERE id = ?', ('done', job_id))\n",
            "a plain UPDATE sets a value: idempotent",
        ),
        Valid(
            "import ray\nimport requests\n\n@ray.remote(retry_exceptions=True)\ndef embed(text):\n"
            "    return requests.post(URL, json={'input': text}).json()\n",
            "an HTTP POST query (reported with include-http-post)",
        ),
        Valid(
            "import ray\n\n@ray.remote\nclass Notifier:\n    def notify(self, smtp, msg):\n        smtp.send_message(msg)\n",
            "actor methods are not retried by default",
        ),
        Valid(
            "import ray\n\n@ray.remote(retry_exceptions=True)\ndef save(conn, row):\n    conn.execute('INSERT INTO t VALUES (?, ?)', row)\n\n"
            "save.options(max_retries=0).remote(conn, row)\n",
            "retries turned off at the call",
        ),
        Valid(
            "import ray\n\n@ray.remote(retry_exceptions=True)\ndef save(conn, rows):\n    def write(row):\n"
            "        conn.execute('INSERT INTO t VALUES (?)', row)\n    return len(rows)\n",
            "the write is in a nested function that is never called here",
        ),
        Valid(
            "@ray.remote(retry_exceptions=True)\ndef save(conn, row):\n    conn.execute('INSERT INTO t VALUES (?)', row)\n",
            "no `import ray`: `ray` is not Ray here",
        ),
    ]
    INVALID = [
        Invalid(
            "import ray\n\n@ray.remote(retry_exceptions=True)\ndef record(conn, order):\n"
            "    conn.execute('INSERT INTO orders (id, total) VALUES (?, ?)', order)\n    notify(order)\n",
            5,
        ),
        Invalid(
            "import ray\nimport smtplib\n\n@ray.remote(max_retries=3, retry_exceptions=[TimeoutError])\ndef alert(msg):\n"
            "    with smtplib.SMTP('mail') as smtp:\n        smtp.send_message(msg)\n",
            7,
            note="an email sent again on retry",
        ),
        Invalid(
            "import ray\nimport redis\n\n@ray.remote(max_retries=5)\ndef count(word):\n    r = redis.Redis()\n    r.incr(word)\n",
            7,
            note="a counter incremented again",
        ),
        Invalid(
            "import ray\n\nSQL = '''\n    UPDATE stats SET hits = hits + 1 WHERE page = %s\n'''\n\n"
            "@ray.remote(retry_exceptions=True)\ndef hit(cursor, page):\n    cursor.execute(SQL, (page,))\n",
            9,
            note="an increment through a module constant",
        ),
        Invalid(
            "import ray\n\n@ray.remote(max_restarts=2, max_task_retries=-1)\nclass Writer:\n"
            "    def write(self, rows):\n        self.cursor.executemany('insert into events values (%s, %s)', rows)\n",
            6,
            note="an actor with task retries on restart",
        ),
        Invalid(
            "import ray\nfrom sqlalchemy import text\n\n@ray.remote\nclass Ledger:\n    @ray.method(max_task_retries=3, retry_exceptions=True)\n"
            "    def credit(self, session, account, amount):\n"
            "        session.execute(text('INSERT INTO ledger (account, amount) VALUES (:a, :m)'), {'a': account, 'm': amount})\n",
            8,
            note="per-method retries with ray.method",
        ),
        Invalid(
            "import ray\n\n@ray.remote\ndef post_summary(client, text):\n    client.chat_postMessage(channel='#ops', text=text)\n\n"
            "post_summary.options(retry_exceptions=True).remote(client, 'done')\n",
            5,
            note="retries enabled at the call",
        ),
    ]

    def needed_tokens(self) -> tuple[str, ...]:
        return (*self.tokens, "post", "patch") if self.settings["include-http-post"] else self.tokens

    def check(self, ctx: Context) -> None:
        model = ctx.model
        for remote in model.remote_defs:
            for function in model.remote_functions(remote):
                retries = self._retries(model, remote, function)
                if retries is None:
                    continue
                write = self._first_write(model, function)
                if write is None:
                    continue
                site, what = write
                name = function.node.name.value
                kind = "actor method" if remote.kind == "actor" else "task"
                ctx.report(
                    site.node,
                    f"The {kind} `{name}` is retried and {what}",
                )

    def _retries(self, model: SemanticModel, remote: RemoteDef, function: FunctionInfo) -> str | None:
        """How Ray retries this function, when the module shows it does; None when it does not or may not."""
        if remote.options_unknowable:
            return None
        if remote.kind == "task":
            return self._task_retries(remote)
        return _actor_method_retries(remote, function)

    def _task_retries(self, remote: RemoteDef) -> str | None:
        max_retries = list(remote.option_values("max_retries"))
        numbers = [literal_number(value) for value in max_retries]
        if any(number is None or number == 0 for number in numbers):
            return None  # retries off somewhere, or not literal
        exceptions = [value for value in remote.option_values("retry_exceptions") if _enabled(value)]
        if exceptions:
            return "`retry_exceptions` is set"
        explicit = [n for n in numbers if n is not None and n != 0]
        if explicit:
            return f"`max_retries={int(explicit[-1])}`"
        if self.settings["include-default-retries"] and not any(True for _ in remote.option_values("retry_exceptions")):
            return "Ray's default `max_retries=3` on worker or node failure"
        return None

    def _first_write(self, model: SemanticModel, function: FunctionInfo) -> tuple[CallSite, str] | None:
        """The first non-idempotent write in the function's own body (nested functions excluded)."""
        for node in iter_subtree(function.node.body, into_functions=False):
            if not isinstance(node, cst.Call):
                continue
            site = model.call_site(node)
            if site is None:
                continue
            what = self._write_kind(model, site)
            if what is not None:
                return site, what
        return None

    def _write_kind(self, model: SemanticModel, site: CallSite) -> str | None:
        call = site.node
        func = call.func
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method in SQL_METHODS and call.args:
            sql = _sql_text(model, call.args[0].value, site)
            if sql is not None and _INSERT.search(sql) and not _UPSERT.search(sql):
                return f"inserts rows with `{method}(\"INSERT ...\")`"
            if sql is not None and _INCREMENT.search(sql):
                return f"increments a column with `{method}(\"UPDATE ...\")`"
            return None
        if method in MESSAGE_METHODS:
            return MESSAGE_METHODS[method] + f" with `.{method}(...)`"
        if method in COUNTER_METHODS and _imports_redis(model):
            return f"changes a Redis value with `.{method}(...)`"
        if self.settings["include-http-post"]:
            return _http_write(model, site)
        return None


def _enabled(value: cst.BaseExpression) -> bool:
    """`retry_exceptions=True` or a list of exception types."""
    if isinstance(value, cst.Name):
        return value.value == "True"
    return isinstance(value, (cst.List, cst.Tuple)) and bool(value.elements)


def _actor_method_retries(remote: RemoteDef, function: FunctionInfo) -> str | None:
    """Actor tasks are retried only with `max_task_retries` (class or `@ray.method`), and then on an exception
    only with `retry_exceptions`, or on the actor's death only when it restarts (`max_restarts`)."""
    method_options = _ray_method_options(function)
    if method_options is None:
        return None
    task_retries = [*remote.option_values("max_task_retries")]
    if "max_task_retries" in method_options.values:
        task_retries = [method_options.values["max_task_retries"]]
    numbers = [number for number in (literal_number(value) for value in task_retries) if number is not None]
    if not numbers or len(numbers) != len(task_retries) or 0 in numbers:
        return None
    exceptions = [*remote.option_values("retry_exceptions")]
    if "retry_exceptions" in method_options.values:
        exceptions = [method_options.values["retry_exceptions"]]
    if exceptions and all(_enabled(value) for value in exceptions):
        return f"`max_task_retries={int(numbers[-1])}` with `retry_exceptions`"
    restarts = [literal_number(value) for value in remote.option_values("max_restarts")]
    if restarts and all(number is not None and number != 0 for number in restarts):
        return f"`max_task_retries={int(numbers[-1])}` when the actor restarts"
    return None


def _ray_method_options(function: FunctionInfo) -> RemoteOptions | None:
    """The options of a `@ray.method(...)` decorator on the method (empty when there is none); None when
    they hide in `**kwargs`."""
    for decorator in function.node.decorators:
        expr = decorator.decorator
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "method":
            options = RemoteOptions.from_call(expr)
            return None if options.has_unpacked else options
    return RemoteOptions(node=None)


def _sql_text(model: SemanticModel, expr: cst.BaseExpression, site: CallSite) -> str | None:
    """The SQL a statement runs: a string literal (an f-string's literal parts), a name assigned one once,
    or `text("...")` around either."""
    if isinstance(expr, cst.Call) and len(expr.args) == 1:
        expr = expr.args[0].value
    if isinstance(expr, cst.Name):
        binding = model.sole_assignment(expr.value, site.scope, site.index)
        if binding is None or binding.value is None:
            return None
        expr = binding.value
    if isinstance(expr, cst.FormattedString):
        return "".join(part.value for part in expr.parts if isinstance(part, cst.FormattedStringText))
    return literal_string(expr)


def _imports_redis(model: SemanticModel) -> bool:
    """Whether the module imports a Redis client (the counter method names are Redis commands)."""
    return model.imports_module("redis") or model.imports_module("aioredis")


def _http_write(model: SemanticModel, site: CallSite) -> str | None:
    call = site.node
    name = model.call_name(site)
    if name in HTTP_POSTS:
        return f"sends an HTTP {name.rsplit('.', 1)[-1].upper()} with `{name}(...)`"
    verb = (literal_string(call.args[0].value) or "").upper() if call.args else ""
    if name in HTTP_REQUESTS and verb in ("POST", "PATCH"):
        return f"sends an HTTP {verb} with `{name}(...)`"
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("post", "patch") and isinstance(func.value, cst.Name):
        binding = model.reaching_binding(func.value.value, site.scope, site.index)
        made_by = binding.value if binding is not None and binding.kind == "assign" else None
        maker = model.qualified_name(made_by.func, binding.scope, binding.index) if binding and isinstance(made_by, cst.Call) else None
        if maker in HTTP_SESSIONS:
            return f"sends an HTTP {func.attr.value.upper()} with a session's `.{func.attr.value}(...)`"
    return None
