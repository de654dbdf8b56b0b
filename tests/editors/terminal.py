"""A real terminal program in a pty, read through a terminal emulator, for the editor
screen tests: what the user would see, as text to assert on and as a PNG.

``Terminal`` starts the program on a pseudo-terminal, feeds everything it writes to a
``pyte`` screen and types keys into it; ``wait_for`` reads until the screen shows
something (reading the program's output is the event: no sleeps). ``render`` draws
the screen's grid, cell by cell with its colours, to a PNG with Pillow.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable, Mapping
from fcntl import ioctl
from pathlib import Path
from typing import TypeVar

import pyte
from PIL import Image, ImageDraw, ImageFont

T = TypeVar("T")

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
FONT_BOLD = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Bold.ttf")
FONT_SIZE = 15

# Neovim's default dark colours, for cells that keep the terminal's defaults.
DEFAULT_FG = (224, 226, 234)
DEFAULT_BG = (20, 22, 27)
ANSI = {
    "black": (0, 0, 0),
    "red": (205, 49, 49),
    "green": (13, 188, 121),
    "brown": (229, 229, 16),
    "yellow": (229, 229, 16),
    "blue": (36, 114, 200),
    "magenta": (188, 63, 188),
    "cyan": (17, 168, 205),
    "white": (229, 229, 229),
    "brightblack": (102, 102, 102),
    "brightred": (241, 76, 76),
    "brightgreen": (35, 209, 139),
    "brightbrown": (245, 245, 67),
    "brightyellow": (245, 245, 67),
    "brightblue": (59, 142, 234),
    "brightmagenta": (214, 112, 214),
    "brightcyan": (41, 184, 219),
    "brightwhite": (255, 255, 255),
}


def _colour(name: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    if name == "default":
        return default
    if name in ANSI:
        return ANSI[name]
    if len(name) == 6:
        try:
            return (int(name[0:2], 16), int(name[2:4], 16), int(name[4:6], 16))
        except ValueError:
            pass
    return default


class _Screen(pyte.Screen):
    def select_graphic_rendition(self, *attrs: int, private: bool = False) -> None:
        # CSI ? 4 m, Vim's query of xterm's modifyOtherKeys: no rendition (pyte 0.8
        # passes ``private`` to every CSI handler and this one does not take it).
        if not private:
            super().select_graphic_rendition(*attrs)


def _controlling_terminal() -> None:
    """In the child, after ``setsid``: make its stdin (the pty) the controlling terminal."""
    ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """``command`` on a ``columns`` x ``lines`` pty, in its own session."""

    def __init__(self, command: list[str], *, cwd: Path, env: Mapping[str, str], columns: int = 110, lines: int = 32) -> None:
        self.screen = _Screen(columns, lines)
        self.stream = pyte.ByteStream(self.screen)
        master, slave = pty.openpty()
        ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.master = master
        # Its own session, with the pty as its controlling terminal (/dev/tty), as a
        # terminal emulator starts a program: Emacs opens /dev/tty.
        self.proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            start_new_session=True,
            preexec_fn=_controlling_terminal,
            close_fds=True,
        )
        os.close(slave)

    def _read(self, timeout: float) -> bool:
        """Feed what the program wrote within ``timeout`` s to the screen; False at EOF."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: the program closed the pty
            return False
        if not data:
            return False
        self.stream.feed(data)
        return True

    def text(self) -> list[str]:
        return list(self.screen.display)

    def wait_for(self, condition: Callable[[list[str]], bool], timeout: float, what: str) -> list[str]:
        """Read the program's output until ``condition(screen lines)`` holds; the lines.
        Fails (with the screen) after ``timeout`` s or when the program exits."""
        self.wait_until(lambda: condition(self.text()), timeout, f"the screen showing {what}")
        return self.text()

    def wait_until(self, condition: Callable[[], T | None], timeout: float, what: str) -> T:
        """Read the program's output until ``condition()`` returns something truthy
        (checked after each output: the program's writes are the events); that value.
        Fails (with the screen) after ``timeout`` s or when the program exits."""
        deadline = time.monotonic() + timeout
        while True:
            found = condition()
            if found:
                return found
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}; the screen:\n" + "\n".join(self.text()))
            if not self._read(min(left, 1.0)):
                raise AssertionError(f"the program exited while waiting for {what}; the screen:\n" + "\n".join(self.text()))

    def wait_exit(self, respond: Callable[[list[str]], None], timeout: float) -> int:
        """Read until the program closes the pty, calling ``respond(screen lines)``
        after each output (to answer its prompts); its exit code. Fails (with the
        screen) if it is still running after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            respond(self.text())
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"the program did not exit within {timeout:g} s; the screen:\n" + "\n".join(self.text()))
            if not self._read(min(left, 1.0)):
                break
        try:
            return self.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the program closed its terminal but did not exit within {timeout:g} s") from None

    @property
    def title(self) -> str:
        """The window title the program last set (OSC 0/2), which the editor probes bump."""
        return str(self.screen.title)

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def close(self, timeout: float) -> int | None:
        """Wait for the program to exit (reading its last output), else kill its session."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.2)
        code = self.proc.poll()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        os.close(self.master)
        return code

    def render(self, path: Path) -> Path:
        """Draw the screen's grid to a PNG at ``path``."""
        # DejaVu (Debian's fonts-dejavu-core) where installed; else Pillow's own font,
        # which draws the same grid with a proportional face and fewer symbols.
        if FONT.exists() and FONT_BOLD.exists():
            font = ImageFont.truetype(str(FONT), FONT_SIZE)
            bold = ImageFont.truetype(str(FONT_BOLD), FONT_SIZE)
        else:
            font = bold = ImageFont.load_default(FONT_SIZE)
        cell_w = round(font.getlength("M"))
        ascent, descent = font.getmetrics()
        cell_h = ascent + descent + 2
        screen = self.screen
        image = Image.new("RGB", (cell_w * screen.columns, cell_h * screen.lines), DEFAULT_BG)
        draw = ImageDraw.Draw(image)
        for y in range(screen.lines):
            row = screen.buffer[y]
            for x in range(screen.columns):
                cell = row[x]
                fg = _colour(cell.fg, DEFAULT_FG)
                bg = _colour(cell.bg, DEFAULT_BG)
                if cell.reverse:
                    fg, bg = bg, fg
                x0, y0 = x * cell_w, y * cell_h
                draw.rectangle([x0, y0, x0 + cell_w - 1, y0 + cell_h - 1], fill=bg)
                if cell.data and cell.data != " ":
                    draw.text((x0, y0 + 1), cell.data, font=bold if cell.bold else font, fill=fg)
                if cell.underscore:
                    draw.line([x0, y0 + cell_h - 2, x0 + cell_w - 1, y0 + cell_h - 2], fill=fg)
        # The cursor, as a block, where the program left it.
        if not screen.cursor.hidden:
            cx, cy = screen.cursor.x * cell_w, screen.cursor.y * cell_h
            draw.rectangle([cx, cy, cx + cell_w - 1, cy + cell_h - 1], outline=DEFAULT_FG)
        path.parent.mkdir(parents=True, exist_ok=True)
        image.save(path)
        return path
