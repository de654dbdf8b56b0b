"""Paths of both platforms where exportlens writes them: SARIF locations with drive
letters and backslashes (Windows' ``ntpath`` and ``PureWindowsPath``, taking the same
branches as on Windows), and the POSIX forms beside them."""

from __future__ import annotations

import ntpath
import posixpath
from pathlib import PurePosixPath, PureWindowsPath

from exportlens.formats.sarif import SRCROOT, _location


def test_a_windows_file_under_the_folder_is_relative_with_forward_slashes() -> None:
    got = _location(r"C:\proj\models\deep net.py", "C:\\proj", ntpath, PureWindowsPath)
    assert got == {"uri": "models/deep%20net.py", "uriBaseId": SRCROOT}


def test_a_windows_file_on_another_drive_is_a_file_uri() -> None:
    # ntpath.relpath raises across drives: the location is the absolute URI instead.
    assert _location(r"D:\other\m.py", "C:\\proj", ntpath, PureWindowsPath) == {"uri": "file:///D:/other/m.py"}
    assert _location(r"C:\elsewhere\m.py", "C:\\proj", ntpath, PureWindowsPath) == {"uri": "file:///C:/elsewhere/m.py"}


def test_posix_forms_alike() -> None:
    assert _location("/proj/models/m.py", "/proj", posixpath, PurePosixPath) == {"uri": "models/m.py", "uriBaseId": SRCROOT}
    assert _location("/other/m.py", "/proj", posixpath, PurePosixPath) == {"uri": "file:///other/m.py"}
