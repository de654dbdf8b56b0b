"""The server's threads and executors are made in one module, ``server/threads.py``,
which documents each; a save runs on those threads and no others; they stop at the exit.

The first tests read the sources (``ast``): a thread, an executor, or asyncio's
default executor anywhere else in ``server/`` fails here. The last one runs the real
server in this process on pipes, as ``exportlens serve`` runs on stdio, opens and
saves a model (a real export in a worker), and compares the threads that appeared
with the documented ones.
"""

from __future__ import annotations

import ast
import json
import os
import queue
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

import pytest

from exportlens.server import framing, threads
from exportlens.server.app import create_server
from tests.server.lsp_client import EXAMPLES

SERVER = Path(__file__).resolve().parents[2] / "server"
ROOT = SERVER.parent
OWNER = SERVER / "threads.py"
WAIT_S = 300.0  # generous: the export warms a worker up first, on a loaded 2-core machine
SHOW_S = 60.0  # for a thread's first task once the diagnostics are out (milliseconds, unloaded)

# Calls that start a thread or make an executor (``to_thread`` and
# ``run_in_executor(None, ...)`` use asyncio's default executor, nameless).
STARTERS = frozenset({"Thread", "Timer", "ThreadPoolExecutor", "ProcessPoolExecutor", "to_thread", "start_new_thread", "set_default_executor"})


def _called(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def thread_starts(source: str, filename: str = "<source>") -> list[str]:
    """Where ``source`` starts a thread or makes an executor: ``file:line: what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Call):
            name = _called(node.func)
            if name in STARTERS:
                found.append(f"{filename}:{node.lineno}: {name}(")
            elif name == "run_in_executor" and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value is None:
                found.append(f"{filename}:{node.lineno}: run_in_executor(None, ...)")
        elif isinstance(node, ast.ClassDef) and any(_called(base) == "Thread" for base in node.bases):
            found.append(f"{filename}:{node.lineno}: a Thread subclass")
    return found


def test_no_server_module_but_threads_starts_a_thread_or_an_executor() -> None:
    modules = sorted(p for p in SERVER.rglob("*.py") if p != OWNER and "__pycache__" not in p.parts)
    assert len(modules) > 30 and SERVER / "framing.py" in modules
    found = [hit for path in modules for hit in thread_starts(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]
    assert not found, "start it in server/threads.py, with its entry there: " + "; ".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "import threading\nthreading.Thread(target=print).start()\n",
        "from threading import Thread\nThread(target=print, daemon=True).start()\n",
        "from concurrent.futures import ThreadPoolExecutor\nio = ThreadPoolExecutor(1)\n",
        "import asyncio\nasync def f():\n    await asyncio.get_running_loop().run_in_executor(None, print)\n",
        "import asyncio\nasync def f():\n    await asyncio.to_thread(print)\n",
        "import threading\nclass Reader(threading.Thread):\n    pass\n",
    ],
)
def test_the_scan_finds_each_way_to_start_one(source: str) -> None:
    assert len(thread_starts(source)) == 1


def test_the_scan_leaves_a_named_executor_alone() -> None:
    assert thread_starts("async def f(ls):\n    await loop.run_in_executor(ls.threads.io, print)\n") == []


def test_each_thread_has_its_entry_in_the_docstring() -> None:
    doc = threads.__doc__ or ""
    entries = re.findall(r"^- ``(exportlens-[a-z-]+)``", doc, re.MULTILINE)
    assert sorted(entries) == sorted(set(entries)) and set(threads.SERVER_THREADS) <= set(entries), entries
    named = set(re.findall(r"``(exportlens-[a-z-]+)``", doc))
    assert named == {*threads.SERVER_THREADS, *threads.CORE_THREADS}, named
    for name in ("STDIN", "LOOKUPS", "IO", "STORES", "VERIFY", "POOL", "POOL_CLOSE"):
        assert f"(``{name}``" in doc, name


def test_the_core_threads_listed_are_the_names_core_gives() -> None:
    core = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "core").rglob("*.py"))
    for name in threads.CORE_THREADS:
        assert f'name="{name}"' in core, name


def test_a_thread_with_no_entry_is_refused_and_not_documented() -> None:
    with pytest.raises(ValueError):
        threads.start("exportlens-something", print)
    with pytest.raises(ValueError):
        threads.start(threads.IO, print)  # an executor's: made by ServerThreads
    stray = threading.Thread(target=print, name="exportlens-iox_0")
    assert threads.documented(stray) is None
    assert threads.documented(threading.Thread(target=print, name="exportlens-io_0")) == threads.IO
    assert threads.documented(threading.Thread(target=print, name="Thread-3")) is None


# ---- the server in this process, on pipes


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class PipeClient:
    """Frames to the server's stdin; what it writes to its stdout, parsed, in ``messages``.
    Requests from the server get an empty answer."""

    def __init__(self, to_server: BinaryIO, from_server: BinaryIO) -> None:
        self._to = to_server
        self._from = from_server
        self._lock = threading.Lock()
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, name="test-client-reader", daemon=True).start()

    def send(self, message: dict[str, Any]) -> None:
        with self._lock:
            self._to.write(_frame({"jsonrpc": "2.0", **message}))
            self._to.flush()

    def _read(self) -> None:
        try:
            while True:
                length = None
                while True:
                    line = self._from.readline()
                    if not line:
                        return
                    if line == b"\r\n":
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                assert length is not None
                message = json.loads(self._from.read(length))
                if "method" in message and "id" in message:  # the server asks: answer
                    items = message.get("params", {}).get("items")
                    self.send({"id": message["id"], "result": [{} for _ in items] if isinstance(items, list) else None})
                self.messages.put(message)
        finally:
            self.messages.put(None)

    def until(self, wanted: Any, what: str) -> dict[str, Any]:
        end = time.monotonic() + WAIT_S
        for message in self.seen:
            if wanted(message):
                return message
        while (left := end - time.monotonic()) > 0:
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                break
            assert message is not None, f"the server closed its stdout before {what}"
            self.seen.append(message)
            if wanted(message):
                return message
        raise AssertionError(f"timed out waiting for {what}: {[m.get('method', m.get('id')) for m in self.seen]}")


def _published(uri: str, version: int) -> Any:
    return lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri and m["params"].get("version") == version


def _documented_names(found: list[threading.Thread]) -> tuple[set[str], list[str]]:
    names: set[str] = set()
    strays = []
    for thread in found:
        entry = threads.documented(thread)
        if entry is None:
            strays.append(thread.name)
        else:
            names.add(entry)
    return names, strays


@pytest.mark.parametrize("polite", [True, False], ids=["shutdown-then-exit", "client-gone"])
def test_a_save_runs_on_the_documented_threads_which_stop_at_the_exit(tmp_path: Path, polite: bool) -> None:
    """``polite``: the client asks for a shutdown first (the server's ``stop``);
    else it just leaves, and ``threads.shutdown`` alone stops everything."""
    path = tmp_path / "counter.py"
    shutil.copy(EXAMPLES / "counter.py", path)
    uri, text = path.as_uri(), path.read_text()
    before = set(threading.enumerate())

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    stdin, to_server = os.fdopen(in_r, "rb", buffering=0), os.fdopen(in_w, "wb")
    stdout, from_server = os.fdopen(out_w, "wb"), os.fdopen(out_r, "rb")
    server = create_server()
    # Stands in for the main thread of ``exportlens serve`` (``app.main``).
    loop_thread = threading.Thread(target=framing.run_stdio, args=(server, stdin, stdout), name="test-event-loop", daemon=True)
    loop_thread.start()
    client = PipeClient(to_server, from_server)
    seen: list[threading.Thread] = []

    def new_threads() -> list[threading.Thread]:
        now = [t for t in threading.enumerate() if t not in before and not t.name.startswith("test-")]
        seen.extend(t for t in now if t not in seen)
        return now

    try:
        client.send(
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "processId": None,
                    "rootUri": tmp_path.as_uri(),
                    "capabilities": {},
                    "workspaceFolders": [{"uri": tmp_path.as_uri(), "name": "ws"}],
                    "initializationOptions": {"exportlens": {"cache_dir": str(tmp_path / "cache")}, "trusted": True},
                },
            }
        )
        client.until(lambda m: m.get("id") == 1 and "method" not in m, "the initialize response")
        client.send({"method": "initialized", "params": {}})
        client.send({"method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}}})
        client.until(_published(uri, 1), "the diagnostics of the open")
        # The save: an edit, written and saved; a new export on the warm worker.
        text = text.replace("add_(1)", "add_(2)")
        path.write_text(text)
        client.send({"method": "textDocument/didChange", "params": {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": text}]}})
        client.send({"method": "textDocument/didSave", "params": {"textDocument": {"uri": uri}}})
        client.until(_published(uri, 2), "the diagnostics of the save")

        # Each thread of a save's path shows up (an executor's first thread starts
        # with its first task: the store and the index follow the diagnostics).
        wanted = {threads.STDIN, threads.LOOKUPS, threads.POOL, threads.IO, threads.STORES}
        end = time.monotonic() + SHOW_S
        while time.monotonic() < end:
            names, strays = _documented_names(new_threads())
            if strays or wanted <= names:
                break
            time.sleep(0.05)
        names, strays = _documented_names(seen)
        assert not strays, f"threads with no entry in server/threads.py: {strays}"
        assert wanted <= names, sorted(names)

        if polite:
            client.send({"id": 2, "method": "shutdown", "params": None})
            client.until(lambda m: m.get("id") == 2 and "method" not in m, "the shutdown response")
    finally:
        to_server.close()  # the client leaves: EOF ends the event loop, as at an editor's exit
        loop_thread.join(WAIT_S)
        server.threads.shutdown()  # what ``app.main`` does then
        stdout.close()
    assert not loop_thread.is_alive()

    # Every thread is stopped but the stdin reader (a daemon blocked on the next ask).
    end = time.monotonic() + 60
    while (left := [t.name for t in new_threads() if t.is_alive() and threads.documented(t) != threads.STDIN]) and time.monotonic() < end:
        time.sleep(0.05)
    assert not left, left
    names, strays = _documented_names(seen)
    assert not strays, strays
