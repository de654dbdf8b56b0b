"""Warm a worker at ``initialize`` when a trusted workspace folder holds a model file.

Only trusted folders (``exportlens.server.trust_gate``) are looked at: a worker preloads
libraries the user's earlier jobs imported, and nothing may start for a folder whose
code the user has not agreed to run. ``exportlens.trust`` warms again once trusted.

Why: a worker imports torch and runs a tiny export before it can take a request,
seconds of one core. Started by the first open, that time is all on the user's
first diagnostics; started when the client connects, it overlaps with the editor
opening the file, the settings being pulled and the cache lookup.

Why not always: a worker holds torch (~400 MB resident) and its import costs a
core for seconds. Editors start a language server for every Python workspace, and
most of them have no model. So the server looks first, on the io thread, for one model
file as ``exportlens check`` defines them (``core.project.files.declares_targets``:
a declaration form in the text, or a file pyproject's ``targets`` names), under the
workspace folders, skipping what ``check`` skips. The look is bounded
(``MAX_FILES`` Python files): a huge tree with no model in its first files is not
warmed, and its first open starts the worker as before. The worker starts after
the client's settings are read (``config_ready``), so a ``workers`` setting pulled
from the client does not restart a pool that just began importing torch.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from typing import TYPE_CHECKING, Iterable

from lsprotocol import types
from pygls import uris

from exportlens.core.project.files import SKIP_DIRS, declares_targets
from exportlens.core.trace import mark

if TYPE_CHECKING:
    from exportlens.server.host import Host

log = logging.getLogger(__name__)

MAX_FILES = 5000  # Python files looked at before giving up (a few hundred ms on a cold disk)
MAX_BYTES = 1 << 20  # a larger .py file is generated code, not a model: not read
CONFIG_WAIT_S = 3.0  # as long as an export waits for the client's settings


def first_model_file(folders: Iterable[str], max_files: int = MAX_FILES) -> str | None:
    """A model file under ``folders`` (breadth first, sorted), or None when there is
    none among the first ``max_files`` Python files."""
    seen = 0
    for folder in folders:
        for directory, dirs, names in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(names):
                if not name.endswith((".py", ".ipynb")):
                    continue
                seen += 1
                if seen > max_files:
                    return None
                path = os.path.join(directory, name)
                if _declares(path):
                    return path
    return None


def _declares(path: str) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO named *.py never blocks us
    except OSError:
        return False
    with open(fd, "rb") as f:
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_BYTES:
                return False
            return declares_targets(path, f.read())
        except OSError:
            return False


async def warm_if_models(server: Host, folders: list[str]) -> None:
    """Start the workers when a workspace folder has a model file; log the decision
    either way (the ``Log`` level, shown in the editor's output with tracing on)."""
    mark("server: looking for a model file")
    found = await asyncio.get_running_loop().run_in_executor(server.threads.io, first_model_file, folders)
    mark("server: looked")
    try:
        await asyncio.wait_for(server.config_ready.wait(), CONFIG_WAIT_S)
    except asyncio.TimeoutError:
        pass
    mark("server: settings read")
    if found is None:
        server.log_message("exportlens: no model file in the workspace; a worker starts at the first export", types.MessageType.Log)
        return
    if server.bridge.starts == 0 and not server.bridge.running:
        server.log_message(f"exportlens: warming a worker at start ({os.path.basename(found)} declares targets)", types.MessageType.Log)
        server.bridge.warm(server.pipeline.preload_dir(found), server.pipeline.start_method(found))


def workspace_folders(root_uri: str | None, root_path: str | None, folder_uris: list[str]) -> list[str]:
    """The local folders of ``initialize``'s workspace (folders, else the root)."""
    uris_ = folder_uris or ([root_uri] if root_uri else [])
    paths = [p for p in (uris.to_fs_path(u) for u in uris_) if p]
    if not paths and root_path:
        paths = [root_path]
    return [p for p in dict.fromkeys(paths) if os.path.isdir(p)]
