"""The shared cache: a second checkout checks a corpus from the store instead of exporting.

A corpus of model files of uneven sizes -- small MLPs and counters, the ~200-line
tiny transformer (bench/models), the deployment-style decoder at Llama-3-8B's sizes
(fake weights; left out with --small) -- in a temporary checkout, against a real
S3-protocol server on loopback (moto_server, IAM on: "ci" may write, "dev" only read),
entries signed with a secret. In the same run:

1. CI's checkout exports everything and writes it: ``check --cache-write``, an empty
   local cache (the baseline);
2. a developer's checkout of the same files at another absolute path, with an empty
   local cache and read-only credentials: ``check`` served from the store;
3. the same again with the results now in its local folder (for reference);
4. the editor: the 70B config model (``bench/bench_big_editor.py``'s: the deployment-style
   decoder at Llama-3-70B's sizes, fake weights; left out with --small), exported and
   written by CI's checkout (``check --cache-write deploy_70b.py``), opened in the real
   language server (a pytest-lsp client over stdio, ``cacheUrl`` set, read-only
   credentials) in the developer's checkout with another empty local cache: the time
   from ``didOpen`` to the file's diagnostics published, against the 1 s target, and
   whether the result came from the store (``exportlens.status``).

Prints each wall time, how many files the second run exported (target 0: every file
``"from": "store"``), and its time as a fraction of the exporting run's (target <= 5 %).

    .venv/bin/python bench/bench_shared.py [--small] [--files N] [--opens N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_big_editor import sizes_70b  # noqa: E402
from bench.bench_bigmodels import DEPLOY_FILE, deploy_file  # noqa: E402
from tests import s3server  # noqa: E402
from tests.server.lsp_client import Doc, running_server  # noqa: E402

MLP = """
import torch
from torch import nn


class MLP{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(*[nn.Sequential(nn.Linear({w}, {w}), nn.ReLU()) for _ in range({depth})])
        self.head = nn.Linear({w}, 4)

    def forward(self, x):
        return self.head(self.layers(x))


model = MLP{i}()
example_args = (torch.randn(2, {w}),)
"""

COUNTER = """
import torch
from torch import nn


class Counter{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x):
        self.steps.add_({i} + 1)
        return x * {i} + self.steps


model = Counter{i}()
example_args = (torch.randn({w}),)
"""


def write_corpus(folder: Path, files: int, big: bool) -> list[str]:
    folder.mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[tool.exportlens]\ntimeout = 600\n")
    names = []
    for i in range(files):
        text = COUNTER.format(i=i, w=3 + i) if i % 3 == 2 else MLP.format(i=i, w=16 * (i + 1), depth=1 + 2 * i)
        (folder / f"model_{i}.py").write_text(textwrap.dedent(text))
        names.append(f"model_{i}.py")
    shutil.copy(ROOT / "bench" / "models" / "tiny_transformer.py", folder / "tiny_transformer.py")
    names.append("tiny_transformer.py")
    if big:
        (folder / "deploy_8b.py").write_text(DEPLOY_FILE)
        names.append("deploy_8b.py")
    return names


def check(checkout: Path, cache: Path, url: str, env: dict[str, str], *extra: str) -> tuple[float, dict, str]:
    command = [sys.executable, "-m", "exportlens", "check", "--format", "json", "--cache-dir", str(cache), "--cache-url", url, *extra]
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=checkout, capture_output=True, env=dict(os.environ, PYTHONWARNINGS="ignore", **env))
    seconds = time.perf_counter() - started
    assert proc.returncode in (0, 1), proc.stderr.decode()[-3000:]
    return seconds, json.loads(proc.stdout), proc.stderr.decode()


async def open_in_editor(checkout: Path, name: str, cache: Path, url: str, env: dict[str, str]) -> tuple[float, dict, int]:
    """The file opened in the real language server (an editor's first open: nothing in
    ``cache``): seconds from ``didOpen`` to its diagnostics published, the server's
    status for it, and how many diagnostics."""
    options = {"cache_dir": str(cache), "cacheUrl": url}
    async with running_server("visual-studio-code", checkout, options, env=env) as (client, _):
        doc = Doc(client, checkout / name)
        started = time.perf_counter()
        doc.open()
        diagnostics = await client.diagnostics_for(doc.uri, 1, timeout=900)
        seconds = time.perf_counter() - started
        status = await client.command("exportlens.status", doc.uri)
    return seconds, status, len(diagnostics)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="leave out the 8B-sized decoder and the 70B editor row")
    parser.add_argument("--files", type=int, default=6, help="small model files (default 6)")
    parser.add_argument("--opens", type=int, default=3, help="editor opens of the 70B model, each with an empty local cache (default 3)")
    parser.add_argument("--keep", type=Path, default=None, help="work in DIR and keep it")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="exportlens-shared-"))
    base.mkdir(parents=True, exist_ok=True)
    server = s3server.start(base / "moto.log")
    try:
        ci_checkout = base / "ci-runner" / "work" / "proj"
        names = write_corpus(ci_checkout, args.files, big=not args.small)
        dev_checkout = base / "home" / "dev" / "src" / "proj"
        shutil.copytree(ci_checkout, dev_checkout)
        url = f"s3://{s3server.BUCKET}/bench"
        secret = {"EXPORTLENS_CACHE_SECRET": "bench secret"}
        print(f"{len(names)} model files: {', '.join(names)}")

        exporting, doc, _ = check(ci_checkout, base / "cache-ci", url, {**server.env("ci"), **secret}, "--cache-write")
        exported = sum(f["from"] == "run" for f in doc["files"])
        sizes = {f["path"]: sum(t["export_ms"] or 0 for t in f["targets"]) for f in doc["files"]}
        print(f"1. CI checkout, exporting and writing:    {exporting:7.2f} s  ({exported} exported; slowest file {max(sizes.values()) / 1000:.1f} s, fastest {min(sizes.values()) / 1000:.2f} s)")

        shared, doc, stderr = check(dev_checkout, base / "cache-dev", url, {**server.env("dev"), **secret})
        origins = [f["from"] for f in doc["files"]]
        exports = sum(o != "store" for o in origins)
        print(f"2. other checkout, empty cache, store:    {shared:7.2f} s  ({origins.count('store')} from the store, {exports} exported)")
        if exports:
            print(stderr[-2000:])

        local, doc, _ = check(dev_checkout, base / "cache-dev", url, {**server.env("dev"), **secret})
        print(f"3. other checkout again, local folder:    {local:7.2f} s  ({sum(f['from'] == 'cache' for f in doc['files'])} from the cache)")
        print(f"store run / exporting run: {100 * shared / exporting:.1f} %  (target <= 5 %, 0 exports: {'yes' if exports == 0 else 'NO'})")

        if not args.small:
            # The 70B config model: CI exports and writes it; an editor in the other
            # checkout, with an empty local cache, opens it from the store.
            big = deploy_file(sizes_70b(80)).replace("def deploy_8b", "def deploy_70b")
            for checkout in (ci_checkout, dev_checkout):
                (checkout / "deploy_70b.py").write_text(big)
            took, doc, _ = check(ci_checkout, base / "cache-ci", url, {**server.env("ci"), **secret}, "--cache-write", "deploy_70b.py")
            [target] = doc["files"][0]["targets"]
            print(f"4. the 70B config model, CI exporting:    {took:7.2f} s  ({target['status']}, {target.get('weights')} weights, export {(target['export_ms'] or 0) / 1000:.1f} s)")
            for i in range(args.opens):
                seconds, status, count = asyncio.run(open_in_editor(dev_checkout, "deploy_70b.py", base / f"cache-editor-{i}", url, {**server.env("dev"), **secret}))
                origin = "from the store" if status.get("from_store") else ("from the cache" if status.get("cached") else "EXPORTED")
                print(f"   editor open {i + 1}, empty local cache: didOpen -> diagnostics {seconds:6.2f} s  ({origin}, {count} diagnostics)  {seconds / 1.0:.2f}x the 1 s target: {'met' if seconds <= 1.0 else 'NOT met'}")
    finally:
        server.stop()
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
