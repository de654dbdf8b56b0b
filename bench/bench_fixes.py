"""Benchmark verified fixes through the real server (issue 45).

For each file of the fix corpus (``tests/corpus/fixes``), opened in ``exportlens
serve`` through a real LSP client, in one run:

- **export**: from a save of new text (a new cache key) to its diagnostics, i.e. one
  export of that file by the server's warm worker, failure analysis included;
- **fixes**: from those diagnostics to ``exportlens/fixesVerified`` for the same
  version: every candidate fix applied to a copy, exported again and its outputs
  compared (chains and together-trials included).

Prints both per file, medians of ``ROUNDS`` saves each, and the ratio fixes/export
against the target (at most 2x one export). Both are measured in the same server, one
after the other, so they see the same machine.

Run: ``.venv/bin/python bench/bench_fixes.py`` (about two minutes on two cores).
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.server.lsp_client import Doc, running_server  # noqa: E402

CORPUS = ROOT / "tests" / "corpus" / "fixes"
ROUNDS = 3
TARGET = 2.0


async def measure(doc: Doc, salt: int) -> tuple[float, float, int]:
    """(export ms, fixes ms, fixes verified) for one save of new text."""
    client = doc.client
    # A statement at the top level changes the tokens (a new export), never the model.
    started = time.perf_counter()
    if salt:
        version = doc.replace("import torch\n", f"import torch\n\n_BENCH = {salt}\n")
        doc.save()
    else:
        version = doc.open()
    await client.diagnostics_for(doc.uri, version)
    exported = time.perf_counter()
    count = await client.fixes_verified(doc.uri, version)
    return (exported - started) * 1000, (time.perf_counter() - exported) * 1000, count


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "corpus"
        shutil.copytree(CORPUS, workspace, ignore=shutil.ignore_patterns("README.md", "__pycache__"))
        options = {"cache_dir": str(Path(tmp) / "cache"), "debounce_ms": 60_000}
        rows = []
        async with running_server("visual-studio-code", workspace, options) as (client, _):
            # The first export of a session also waits for the worker to warm up.
            warm = Doc(client, workspace / "transpose_input.py")
            await measure(warm, 0)
            warm.close()
            for path in sorted(workspace.glob("*.py")):
                doc = Doc(client, path)
                await measure(doc, 0)  # opened: the first result, and its fixes
                runs = [await measure(doc, salt) for salt in range(1, ROUNDS + 1)]
                doc.close()
                export = statistics.median(r[0] for r in runs)
                fixes = statistics.median(r[1] for r in runs)
                rows.append((path.name, export, fixes, runs[-1][2]))
        print(f"{'file':24} {'export ms':>10} {'fixes ms':>10} {'fixes':>6} {'ratio':>6}")
        for name, export, fixes, count in rows:
            print(f"{name:24} {export:10.0f} {fixes:10.0f} {count:6d} {fixes / export:6.2f}")
        with_fixes = [fixes / export for _, export, fixes, count in rows if count]
        median = statistics.median(with_fixes)
        worst = max(with_fixes)
        print(f"\nfiles with fixes: {len(with_fixes)} of {len(rows)}; fixes / export: median {median:.2f}x, worst {worst:.2f}x (target <= {TARGET:.1f}x): {'met' if median <= TARGET else 'not met'}")


if __name__ == "__main__":
    asyncio.run(main())
