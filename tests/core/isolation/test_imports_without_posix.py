"""Every module of the package imports where POSIX's extras are missing, as on Windows.

Windows has no ``resource`` or ``fcntl`` module, no ``os.fork``, ``os.posix_spawn``,
``os.pread``, ``os.killpg``, ``os.setpgid`` or ``os.WNOHANG``, no ``faulthandler.register``
and no ``SIGKILL``, ``SIGUSR1``, ``SIGSTOP``... A module that names one of them at import
fails to import there, and with it the worker. So a subprocess here takes them away
(``WITHOUT``) and then imports every module of ``exportlens``: only what a module does at
import is checked; what it calls later is behind ``capabilities`` and runs on Linux under
``EXPORTLENS_SUPERVISION=portable`` (``test_portable``, ``test_spawn``).

The standard library's and torch's own modules are imported before the attributes are
taken away: on Windows they take their Windows branches, which Linux cannot show.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = {"exportlens.core": ROOT / "core", "exportlens.server": ROOT / "server", "exportlens": ROOT / "exportlens"}

# What Windows lacks of what a POSIX Python has, that this package's code uses or might.
WITHOUT = {
    "modules": ["resource", "fcntl", "termios", "pwd", "grp"],
    "os": ["fork", "posix_spawn", "POSIX_SPAWN_DUP2", "pread", "pwrite", "killpg", "setpgid", "getpgid", "setsid", "WNOHANG", "memfd_create", "getuid", "WIFSIGNALED", "WTERMSIG", "WIFEXITED", "WEXITSTATUS"],
    "signal": ["SIGKILL", "SIGUSR1", "SIGUSR2", "SIGSTOP", "SIGHUP", "SIGCHLD", "SIGPIPE", "SIGALRM", "setitimer", "pthread_kill"],
    "faulthandler": ["register"],
}

PRELUDE = """
import faulthandler, importlib, json, os, signal, sys, traceback
# What exportlens imports from outside, imported as they are (their Windows branches
# are theirs): the standard library's process and event-loop modules, torch, pygls, psutil.
for name in ("subprocess", "asyncio", "multiprocessing", "concurrent.futures", "selectors", "tempfile", "torch", "pygls.lsp.server", "lsprotocol.types", "msgpack", "watchdog.observers", "psutil"):
    importlib.import_module(name)
without = json.loads(sys.argv[1])
for name in without["modules"]:
    sys.modules[name] = None  # ``import resource`` now raises ImportError
for module in (os, signal, faulthandler):
    for attr in without[module.__name__]:
        if hasattr(module, attr):
            delattr(module, attr)
failed = {}
for name in json.loads(sys.argv[2]):
    try:
        importlib.import_module(name)
    except BaseException:
        failed[name] = traceback.format_exc(limit=-3)
print(json.dumps(failed))
"""


def package_modules() -> list[str]:
    """Every module of the package, by its import name (pyproject maps core/ and server/ into it)."""
    names: list[str] = []
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__main__":
                continue  # running, not importing
            if parts[-1] == "__init__":
                parts.pop()
            names.append(".".join([package, *parts]))
    return names


def test_every_module_imports_without_what_windows_lacks() -> None:
    modules = package_modules()
    assert "exportlens.core.isolation.jobprocess" in modules and "exportlens.core.isolation.spawning" in modules
    env = {k: v for k, v in os.environ.items() if k != "EXPORTLENS_SUPERVISION"}
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE, json.dumps(WITHOUT), json.dumps(modules)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    failed = json.loads(done.stdout.splitlines()[-1])
    assert failed == {}, "\n".join(f"{name}:\n{text}" for name, text in failed.items())


def test_a_module_that_needs_them_is_caught() -> None:
    """The check can fail: the standard library's ``pty`` imports ``termios`` at its top."""
    done = subprocess.run([sys.executable, "-c", PRELUDE, json.dumps(WITHOUT), json.dumps(["pty"])], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    failed = json.loads(done.stdout.splitlines()[-1])
    assert list(failed) == ["pty"] and "import of termios halted" in failed["pty"]
