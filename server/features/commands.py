"""``workspace/executeCommand``: the commands editors bind to keys and status items.

- ``exportlens.reexport`` (uri): export the buffer again now, bypassing the cache;
  returns the status below once done.
- ``exportlens.showGraph`` (uri, [target]): the exported graph of each target (or of
  the one named) as torch prints it, as one string.
- ``exportlens.clearCache``: empty the result cache of every open document (each may
  have its own, by ``[tool.exportlens] cache_dir``), or with none open the workspace's;
  returns how many results they held.
- ``exportlens.trust`` (folder?): trust a folder (a folder, a file or a ``file:`` URI;
  default: the workspace folders) so the server runs its model code, and export its
  open files now (``features/untrusted``); returns ``{"trusted": [folders]}``.
- ``exportlens.status`` (uri): ``{"state": "exporting"|"ok"|"error"|"idle", "errors": n,
  "targets": [{name, line, status, export_ms}], "version", "cached", "workers",
  "settings": {the effective settings}}``.

Arguments may be positional (``[uri, target]``) or one object (``[{"uri": ..., "target": ...}]``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams

from exportlens.core.project.files import declares_targets
from exportlens.server.features import notebook_sync, untrusted

# A runtime import (not TYPE_CHECKING): pygls reads command handlers' type hints.
from exportlens.server.host import Host

log = logging.getLogger(__name__)

REEXPORT = "exportlens.reexport"
SHOW_GRAPH = "exportlens.showGraph"
CLEAR_CACHE = "exportlens.clearCache"
STATUS = "exportlens.status"
TRUST = untrusted.TRUST
COMMANDS = (REEXPORT, SHOW_GRAPH, CLEAR_CACHE, STATUS, TRUST)


def _arguments(args: tuple[Any, ...]) -> tuple[str | None, str | None]:
    """``(uri, target)`` from either argument style."""
    if len(args) == 1 and isinstance(args[0], dict):
        uri, target = args[0].get("uri"), args[0].get("target")
    else:
        uri = args[0] if args else None
        target = args[1] if len(args) > 1 else None
    if uri is not None and not isinstance(uri, str):
        raise JsonRpcInvalidParams(f"expected a document URI, got {uri!r}")
    if target is not None and not isinstance(target, str):
        raise JsonRpcInvalidParams(f"expected a target name, got {target!r}")
    return uri, target


def effective_settings(server: Host) -> dict[str, Any]:
    s = server.settings
    return {
        "debounce_ms": s.debounce_ms,
        "timeout_s": s.timeout_s,
        "memory_mb": s.memory_mb,
        "workers": s.workers,
        "start_method": s.start_method,
        "cache": s.cache,
        "cache_dir": s.cache_dir,
        "cache_url": s.cache_url,
        "cache_write": s.cache_write,
        "strict": s.strict,
        "inlay_hints": s.inlay_hints,
        "diagnostics": {"disabled": sorted(s.diagnostics.disabled)},
        "pull_diagnostics": server.client.pull_diagnostics,
    }


def status(server: Host, uri: str) -> dict[str, Any]:
    state = server.documents.get(uri)
    workers = server.bridge.state.value
    settings = effective_settings(server)
    stores = server.shared_caches()
    if state is None:
        return {"state": "idle", "errors": 0, "targets": [], "version": None, "cached": False, "from_store": False, "workers": workers, "settings": settings, "store": stores}
    result = state.result
    errors = sum(d.severity == "error" for d in result.diagnostics) if result else 0
    if server.scheduler.busy(uri) and (state.declares or state.view or declares_targets(state.path, server.workspace.get_text_document(uri).source)):
        label = "exporting"  # a plain file, whose run only looks for the targets that import it: idle
    elif result is None or not (state.declares or state.view):  # a model module shows its view
        label = "error" if state.failure else "idle"
    else:
        label = "error" if errors else "ok"
    return {
        "state": label,
        "errors": errors,
        "targets": state.targets,
        "version": state.result_version,
        "cached": state.from_cache,
        "from_store": state.from_store,
        "workers": workers,
        "settings": settings,
        "store": stores,
    }


def graph_text(server: Host, uri: str, target: str | None) -> str:
    state = server.documents.get(uri)
    if state is None or state.result is None:
        raise JsonRpcInvalidParams(f"{uri} has no export result (is it open and does it declare a target?)")
    chosen = [t for t in state.result.targets if target is None or t.name == target]
    if not chosen:
        names = ", ".join(t.name for t in state.result.targets) or "none"
        raise JsonRpcInvalidParams(f"no target {target!r} in {uri} (targets: {names})")
    parts = []
    for t in chosen:
        body = t.graph.rstrip() if t.graph else f"(no graph: the export {'failed' if t.status == 'error' else 'kept none'})"
        parts.append(f"# {t.name}\n{body}\n")
    return "\n".join(parts)


def register(server: Host) -> None:
    @server.command(REEXPORT)
    async def reexport(ls: Host, *args: Any) -> dict[str, Any]:
        uri, _ = _arguments(args)
        uri = notebook_sync.in_module(ls, uri)[0] if uri is not None else None
        if uri is None or uri not in ls.documents:
            raise JsonRpcInvalidParams(f"{REEXPORT}: expected the URI of an open document, got {uri!r}")
        ls.fresh.add(uri)
        ls.scheduler.schedule(uri, delay=False)
        await ls.scheduler.settled(uri)
        return status(ls, uri)

    @server.command(SHOW_GRAPH)
    def show_graph(ls: Host, *args: Any) -> str:
        uri, target = _arguments(args)
        if uri is None:
            raise JsonRpcInvalidParams(f"{SHOW_GRAPH}: expected a document URI")
        return graph_text(ls, notebook_sync.in_module(ls, uri)[0], target)

    @server.command(CLEAR_CACHE)
    async def clear_cache(ls: Host, *args: Any) -> int:
        # A cache folder belongs to a file (its pyproject may name one): clear those of
        # the open files, else the one a file at the workspace's top would use.
        paths = [state.path for state in ls.documents.values()]
        if not paths:
            paths = [os.path.join(ls.workspace.root_path or os.getcwd(), "_")]
        # On the stores' thread, after every store submitted before it (those still
        # waiting to go there first): a result still being stored (a re-export's, which
        # the client has seen) would land after the clearing and be served again.
        ls.deferred_stores.flush()
        return int(await asyncio.get_running_loop().run_in_executor(ls.threads.stores, ls.pipeline.clear, paths))

    @server.command(TRUST)
    def trust(ls: Host, *args: Any) -> dict[str, Any]:
        return untrusted.trust_command(ls, args)

    @server.command(STATUS)
    def get_status(ls: Host, *args: Any) -> dict[str, Any]:
        uri, _ = _arguments(args)
        if uri is None:
            raise JsonRpcInvalidParams(f"{STATUS}: expected a document URI")
        return status(ls, notebook_sync.in_module(ls, uri)[0])
