"""``exportlens serve --tcp/--socket`` as a process: its stderr collected, the address it
printed once it listens. Shared by the socket tests and the editors' tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.conftest import session_members
from tests.server.lsp_client import SERVE

ANSWER_S = 60.0  # generous: a loaded 2-core machine; the server listens within seconds
LISTENING = re.compile(r"exportlens serve: listening on (\S+?)(?:,| |$)")


class ServerProcess:
    """``exportlens serve ARGS`` with stderr collected; ``address`` once it listens."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None, umask: int = 0) -> None:
        full = dict(os.environ, PYTHONWARNINGS="ignore", EXPORTLENS_LOG_LEVEL="WARNING")
        full.pop("EXPORTLENS_TOKEN", None)
        full.update(env or {})
        # umask 0: what the server makes private, it makes private itself.
        self.proc = subprocess.Popen([sys.executable, *SERVE, *args], cwd=cwd, env=full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, umask=umask, start_new_session=True)
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            with self._changed:
                self.lines.append(raw.decode(errors="replace"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("")  # EOF
            self._changed.notify_all()

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_line(self, pattern: str, timeout: float = ANSWER_S) -> re.Match[str]:
        with self._changed:
            found = self._changed.wait_for(lambda: next((m for line in self.lines if (m := re.search(pattern, line))), None) or (self.lines and self.lines[-1] == ""), timeout)
            match = next((m for line in self.lines if (m := re.search(pattern, line))), None)
        if match is None:
            raise AssertionError(f"no line matching {pattern!r} (exit {self.proc.poll()}, found {found!r}); stderr: {self.stderr[-3000:]}")
        return match

    def count(self, pattern: str, at_least: int, timeout: float = ANSWER_S) -> int:
        """The number of lines matching ``pattern``, once there are ``at_least`` (or
        stderr ended, or ``timeout``): a line the server wrote may not be read yet."""

        def found() -> int:
            return sum(1 for line in self.lines if re.search(pattern, line))

        with self._changed:
            self._changed.wait_for(lambda: found() >= at_least or (self.lines and self.lines[-1] == ""), timeout)
            return found()

    def listening(self) -> str:
        return self.wait_line(LISTENING.pattern).group(1)

    def address(self) -> tuple[str, int]:
        host, _, port = self.listening().rpartition(":")
        return host.strip("[]"), int(port)

    def wait(self, timeout: float = ANSWER_S) -> int:
        """The exit code, once the server exited and all it wrote on stderr was read."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"the server did not exit; stderr: {self.stderr[-3000:]}") from None
        with self._changed:
            self._changed.wait_for(lambda: self.lines and self.lines[-1] == "", timeout)
        return code

    def leftovers(self, grace_s: float = 30.0) -> list[str]:
        """The processes of the server's session still running ``grace_s`` after it
        exited (its workers must go with it)."""
        deadline = time.monotonic() + grace_s
        while (found := session_members(self.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        return found

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # workers of a server that was killed
        except ProcessLookupError:
            pass
