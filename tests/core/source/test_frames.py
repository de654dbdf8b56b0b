"""Frames: parsed out of traceback text, and the deepest one in the model file."""

from __future__ import annotations

import os
from pathlib import Path

from exportlens.core.source.frames import Frame, deepest_in_file, frames_in_text, same_file


def test_frames_in_text() -> None:
    text = 'Traceback:\n  File "/a/m.py", line 12, in forward\n    x\n  File "/b/t.py", line 3, in f\n'
    assert frames_in_text(text) == [("/a/m.py", 12, "forward"), ("/b/t.py", 3, "f")]
    assert frames_in_text('File "/a/m.py", line 7\n') == [("/a/m.py", 7, "")]


def test_deepest_frame_in_the_file_through_a_symlink(tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    model.write_text("x = 1\n")
    link = tmp_path / "link.py"
    os.symlink(model, link)
    assert same_file(str(link), str(model)) and not same_file(str(model), str(tmp_path / "other.py"))
    frames = [Frame(str(model), 3, "forward"), Frame("/torch/x.py", 10), Frame(str(link), 5, "helper"), Frame("/torch/y.py", 1)]
    assert deepest_in_file(frames, str(model)) == Frame(str(link), 5, "helper")
    assert deepest_in_file(frames, str(tmp_path / "other.py")) is None
