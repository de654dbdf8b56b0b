"""The live progress line of ``check`` and ``snapshot`` on a terminal::

    ⠹ 12/25 files · 30/41+ targets · 3 cached · 14.2 s · exporting Encoder (models/enc.py 2/3)
    ⠼ 0/1 files · 0/1 targets · 31.0 s · tracing Llama70B (llama.py)

A check of a folder of real models takes tens of seconds; without this it prints
nothing until the end. The line is redrawn in place on stderr (``\\r`` and erase to
the end of the line), at each event from the pipeline and every tenth of a second
for the clock, cut to the terminal's width, and erased at the end, so what remains
on the screen is the report alone. It is only ever drawn on a terminal (see
``wanted``): a CI log, a pipe or a machine format never sees a byte of it.

Standard library only: one line, no layout, no colour of its own; ``rich`` would
add an import of its own to every run for the same line. Events come from the
pool's thread and the caller's; one lock orders them with the clock's redraws.
Warnings logged while the line is up are written above it (``LogHandler``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import IO

from exportlens.core.model.results import FileResult
from exportlens.terminal import truncate

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_S = 0.1
CLEAR = "\r\x1b[K"


def wanted(stream: IO[str], *, fmt: str, quiet: bool) -> bool:
    """Progress only for people: on a terminal, in the text report, unless ``--quiet``."""
    if quiet or fmt not in ("text", "snapshot"):
        return False
    try:
        return stream.isatty() and os.environ.get("TERM") != "dumb"
    except (AttributeError, ValueError, OSError):
        return False


class Progress:
    """The progress of one run over ``files`` files; a context manager that starts
    the clock and erases the line on exit (Ctrl-C included). Implements the
    pipeline's ``RunListener``."""

    def __init__(self, stream: IO[str], files: int, display: dict[str, str] | None = None) -> None:
        self._stream = stream
        self._files = files
        self._display = display or {}  # real path -> the path as the report shows it
        self._lock = threading.Lock()
        self._done_files = 0
        self._done_targets = 0
        self._hits = 0
        self._totals: dict[str, int] = {}  # targets per file, once known
        self._running: dict[str, tuple[str | None, int | None, int | None, str]] = {}  # path -> (target, index, total, phase)
        self._latest: str | None = None
        self._started = time.monotonic()
        self._frame = 0
        self._stop = threading.Event()
        self._clock = threading.Thread(target=self._tick, name="exportlens-progress", daemon=True)
        self._shown = False

    # ---- the pipeline's RunListener

    def target_begins(self, path: str, target: str | None, index: int | None, total: int | None, phase: str = "") -> None:
        with self._lock:
            self._running[path] = (target, index, total, phase)
            self._latest = path
            if total is not None:
                self._totals[path] = total
            self._draw()

    def file_done(self, result: FileResult, cached: bool) -> None:
        with self._lock:
            self._done_files += 1
            self._done_targets += len(result.targets)
            self._totals[result.path] = len(result.targets)
            self._hits += cached
            self._running.pop(result.path, None)
            if self._latest == result.path:
                self._latest = next(reversed(self._running), None) if self._running else None
            self._draw()

    # ---- drawing

    def __enter__(self) -> Progress:
        with self._lock:
            self._draw()
        self._clock.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._clock.join()
        with self._lock:
            self.clear()

    def clear(self) -> None:
        """Erase the line (the caller holds the lock, or the clock is stopped)."""
        if self._shown:
            self._write(CLEAR)
            self._shown = False

    def line(self) -> str:
        """The text of the line now (without the spinner)."""
        running = sum((i or 1) - 1 for _, i, _, _ in self._running.values())
        known = sum(self._totals.values())
        unknown = self._files - len(self._totals)
        parts = [f"{self._done_files}/{self._files} files", f"{self._done_targets + running}/{known}{'+' * (unknown > 0)} targets"]
        if self._hits:
            parts.append(f"{self._hits} cached")
        parts.append(f"{time.monotonic() - self._started:.1f} s")
        if self._latest is not None and self._latest in self._running:
            target, index, total, phase = self._running[self._latest]
            where = self._display.get(self._latest, os.path.basename(self._latest))
            count = f" {index}/{total}" if index is not None and total is not None else ""
            more = f" +{len(self._running) - 1} more" if len(self._running) > 1 else ""
            doing = phase or "exporting"
            parts.append(f"{doing} {target or '…'} ({where}{count}){more}" if target or not phase else f"{doing} ({where}){more}")
        elif not self._running and self._done_files < self._files:
            parts.append("waiting for the export workers")  # they import torch: seconds before the first target
        return " · ".join(parts)

    def _draw(self) -> None:
        try:
            columns = os.get_terminal_size(self._stream.fileno()).columns or 80  # 0: a terminal that never said
        except (OSError, ValueError, AttributeError):
            columns = 80
        self._frame += 1
        text = truncate(f"{SPINNER[self._frame % len(SPINNER)]} {self.line()}", max(10, columns - 1))
        self._write(CLEAR + text)
        self._shown = True

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            pass  # the terminal went away: the report still goes to stdout

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            with self._lock:
                self._draw()

    def above(self, text: str) -> None:
        """Write a whole line above the progress line and draw it again."""
        with self._lock:
            self.clear()
            self._write(text + "\n")
            if not self._stop.is_set():
                self._draw()


class LogHandler(logging.Handler):
    """Warnings logged during a run, written above the progress line when one is up."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self.stream = stream
        self.progress: Progress | None = None

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            if self.progress is not None:
                self.progress.above(text)
            else:
                self.stream.write(text + "\n")
                self.stream.flush()
        except Exception:  # noqa: BLE001 - logging must never break a check
            self.handleError(record)
