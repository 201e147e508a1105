"""Calls that block the thread they run on (`time.sleep`, synchronous HTTP, subprocesses, blocking
name resolution), what to use instead in a coroutine, and the one fix that is always right:
`time.sleep(x)` -> `await asyncio.sleep(x)`.

Shared by the rules that find them on an event loop (async actor methods, async Serve methods).
`ray.get` / `ray.wait` are not here: RAY006 owns them.
"""

from __future__ import annotations

import libcst as cst

from ray_lint.diagnostics import Applicability
from ray_lint.model import SemanticModel
from ray_lint.python_model import CallSite, FunctionInfo, literal_number, literal_string, root_name
from ray_lint.rule import Context, FixPlan

HTTP_VERBS = ("get", "post", "put", "patch", "delete", "head", "options", "request")
# Blocking calls by qualified name, with what to use instead.
BLOCKING_CALLS: dict[str, str] = {
    "time.sleep": "`await asyncio.sleep(...)`",
    **{f"requests.{verb}": "an async client (aiohttp, `httpx.AsyncClient`) or `await asyncio.to_thread(...)`" for verb in HTTP_VERBS},
    **{f"httpx.{verb}": "`httpx.AsyncClient` or `await asyncio.to_thread(...)`" for verb in (*HTTP_VERBS, "stream")},
    "urllib.request.urlopen": "an async client (aiohttp, `httpx.AsyncClient`) or `await asyncio.to_thread(...)`",
    "urllib3.request": "an async client (aiohttp, `httpx.AsyncClient`) or `await asyncio.to_thread(...)`",
    # The `wikipedia` package, a synchronous client over `requests`.
    **{f"wikipedia.{name}": "`await asyncio.to_thread(...)`" for name in ("search", "page", "summary", "suggest", "geosearch", "random")},
    **{
        f"subprocess.{name}": "`await asyncio.create_subprocess_exec(...)` or `await asyncio.to_thread(...)`"
        for name in ("run", "call", "check_call", "check_output", "getoutput", "getstatusoutput")
    },
    **{f"os.{name}": "`asyncio.create_subprocess_*` or `await asyncio.to_thread(...)`" for name in ("system", "wait", "waitpid", "wait3", "wait4")},
    **{
        f"socket.{name}": "`await loop.getaddrinfo(...)` / `asyncio.open_connection(...)` or `await asyncio.to_thread(...)`"
        for name in ("create_connection", "getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr")
    },
}
# Commands that answer at once from the machine itself. A probe of the GPU or the host such as
# `subprocess.run(["nvidia-smi", "-L"])` is the catalogue's "short blocking call", not a stall; their
# looping forms (`nvidia-smi -l 1`, `nvidia-smi dmon`) are not quick.
QUICK_COMMANDS = frozenset({"nvidia-smi", "rocm-smi", "hostname", "uname", "whoami", "nproc", "lscpu", "which"})
LOOPING_ARGUMENTS = frozenset({"-l", "-lms", "--loop", "--loop-ms", "dmon", "pmon"})
# Text one of the names above needs in the file, whatever its import style (`from time import sleep`).
BLOCKING_TOKENS = ("sleep", "requests", "httpx", "urlopen", "urllib3", "subprocess", "system", "wait", "socket", "wikipedia")


def blocking_call(model: SemanticModel, site: CallSite) -> str | None:
    """The qualified name of the blocking function the call calls, resolved through imports and aliases;
    None for other calls, for calls on objects of unknown type and for `time.sleep(0)` (it only yields)."""
    if not isinstance(site.node.func, (cst.Name, cst.Attribute)):
        return None
    name = model.call_name(site)
    if name is None or name not in BLOCKING_CALLS:
        return None
    if name == "time.sleep" and sleeps_zero(site.node):
        return None
    return None if name.startswith(("subprocess.", "os.system")) and _quick_command(site.node) else name


def sleeps_zero(call: cst.Call) -> bool:
    return len(call.args) == 1 and literal_number(call.args[0].value) == 0


def _quick_command(call: cst.Call) -> bool:
    """Whether the call runs one of `QUICK_COMMANDS`, written as a literal (`["nvidia-smi", "-L"]`,
    `"hostname -f"`), without a looping argument."""
    if not call.args or call.args[0].keyword is not None or call.args[0].star:
        return False
    command = call.args[0].value
    if isinstance(command, (cst.List, cst.Tuple)):
        found = [literal_string(element.value) if isinstance(element, cst.Element) else None for element in command.elements]
        words = [word for word in found if word is not None]
        if len(words) != len(found):  # a starred or computed part: the command is not all in the code
            return False
    else:
        text = literal_string(command)
        if text is None or any(mark in text for mark in ";|&$`"):
            return False
        words = text.split()
    return bool(words) and words[0] in QUICK_COMMANDS and not LOOPING_ARGUMENTS & set(words[1:])


def sleep_fix(ctx: Context, site: CallSite, method: FunctionInfo) -> FixPlan | None:
    """`time.sleep(x)` as a statement of the coroutine itself -> `await asyncio.sleep(x)`, importing asyncio
    before the module-level import of the sleep function when it is not imported."""
    model, call = ctx.model, site.node
    statement = site.statement
    if site.scope is not method.scope or not isinstance(statement, cst.Expr) or statement.value is not call:
        return None
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return None
    replacements: list[tuple[cst.CSTNode, str]] = []
    if model.qualified_name(cst.Name("asyncio"), site.scope, site.index) != "asyncio":
        anchor = _module_import_to_precede(model, site)
        if anchor is None:
            return None
        # The import of `time` (or of `sleep`) goes when this call was its only use: no unused import stays.
        kept = "" if _only_use(model, anchor, site) else f"\n{ctx.code_for(anchor)}"
        replacements.append((anchor, f"import asyncio{kept}"))
    replacements.append((call, f"await asyncio.sleep({ctx.code_for(call.args[0].value)})"))
    return FixPlan("Use `await asyncio.sleep(...)`", tuple(replacements), Applicability.UNSAFE)


def _module_import_to_precede(model: SemanticModel, site: CallSite) -> cst.Import | cst.ImportFrom | None:
    """Where `import asyncio` can go: before the top-level `import time` (or `from time import sleep`) that
    the call resolves through, when no other binding of `asyncio` exists and no star import could make one."""
    if model.star_imports or any("asyncio" in scope.bindings for scope in model.scopes):
        return None
    func = site.node.func
    while isinstance(func, cst.Attribute):
        func = func.value
    if not isinstance(func, cst.Name):
        return None
    binding = model.reaching_binding(func.value, site.scope, site.index)
    if binding is None or binding.kind != "import" or binding.scope is not model.module_scope:
        return None
    for statement in model.module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, (cst.Import, cst.ImportFrom)) and _binds(small, binding.node):
                    return small
    return None


def _only_use(model: SemanticModel, anchor: cst.Import | cst.ImportFrom, site: CallSite) -> bool:
    """Whether `anchor` imports one name, which only the sleep call at `site` reads."""
    if isinstance(anchor.names, cst.ImportStar) or len(anchor.names) != 1:
        return False
    name = root_name(site.node.func)
    return name is not None and model.read_counts[name] == 1


def _binds(statement: cst.Import | cst.ImportFrom, alias: cst.CSTNode) -> bool:
    return not isinstance(statement.names, cst.ImportStar) and any(name is alias for name in statement.names)
