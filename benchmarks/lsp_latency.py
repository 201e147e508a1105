"""How long the language server takes from a `didChange` to its `publishDiagnostics`.

Starts the real server (`python -m ray_lint server`) over stdio, opens a Ray file of about 1,000
lines (`--lines`), then sends edits one at a time and times each until the diagnostics for that
version arrive. Run with the debounce off (`debounce-ms: 0`, the lint itself) and with the default
300 ms, and prints the median and worst latency of each. A benchmark, not a test:

    python benchmarks/lsp_latency.py [--lines 1000] [--edits 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

BLOCK = '''
@ray.remote
def score_{i}(batch):
    total = 0
    for row in batch:
        total += row * {i}
    return total


def run_{i}(batches):
    results = []
    for batch in batches:
        results.append(ray.get(score_{i}.remote(batch)))
    refs = [score_{i}.remote(b) for b in batches]
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=10.0)
    return results, ray.get(ready)
'''


def ray_module(lines: int) -> str:
    parts = ["import ray\n"]
    i = 0
    while sum(part.count("\n") for part in parts) < lines:
        parts.append(BLOCK.format(i=i))
        i += 1
    return "".join(parts)


async def measure(text: str, edits: int, debounce_ms: int) -> list[float]:
    client = LanguageClient("ray-lint-benchmark", "1")
    published: dict[int, float] = {}
    arrived = asyncio.Event()

    @client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_publish(params: types.PublishDiagnosticsParams) -> None:
        if params.version is not None:
            published[params.version] = time.perf_counter()
            arrived.set()

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def on_register(params: types.RegistrationParams) -> None:
        return None

    await client.start_io(sys.executable, "-m", "ray_lint", "server")
    root = Path.cwd()
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=root.as_uri(),
            initialization_options={"debounce-ms": debounce_ms},
        )
    )
    client.initialized(types.InitializedParams())
    uri = (root / "benchmark_module.py").as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    await _wait(arrived, published, 1)
    latencies = []
    for version in range(2, edits + 2):
        edit = types.TextDocumentContentChangePartial(
            range=types.Range(start=types.Position(line=1, character=0), end=types.Position(line=1, character=0)),
            text=f"# edit {version}\n",
        )
        sent = time.perf_counter()
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version), content_changes=[edit]
            )
        )
        await _wait(arrived, published, version)
        latencies.append(published[version] - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return latencies


async def _wait(arrived: asyncio.Event, published: dict[int, float], version: int) -> None:
    while version not in published:
        arrived.clear()
        await asyncio.wait_for(arrived.wait(), 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--debounce", type=int, nargs="+", default=[0, 300], help="debounce-ms values to try")
    args = parser.parse_args()
    text = ray_module(args.lines)
    print(f"file: {text.count(chr(10))} lines; {args.edits} edits, one at a time")
    for debounce in args.debounce:
        latencies = asyncio.run(measure(text, args.edits, debounce))
        median, worst = statistics.median(latencies) * 1000, max(latencies) * 1000
        print(f"debounce {debounce:>3} ms: didChange -> publishDiagnostics median {median:.0f} ms, worst {worst:.0f} ms")


if __name__ == "__main__":
    main()
