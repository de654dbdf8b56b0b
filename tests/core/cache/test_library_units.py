"""The library part of a result's key: which files a job depended on
(``libraries.depended_on``) and the state of each (``keys.unit_state``), by content
only -- a distribution's name, version and RECORD hash, another module's bytes --
so two machines with the same files compute the same key."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from exportlens.core.cache import keys
from exportlens.core.export import libraries


def _distribution(site: Path, name: str = "foo", version: str = "1.2") -> Path:
    """``name`` installed in ``site`` as a wheel installs it; its RECORD."""
    (site / name).mkdir(parents=True)
    (site / name / "__init__.py").write_text("from .bar import X\n")
    (site / name / "bar.py").write_text("X = 1\n")
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = [f"{name}/__init__.py,sha256=x,18", f"{name}/bar.py,sha256=y,6", f"{info.name}/METADATA,,", f"{info.name}/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    return info / "RECORD"


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A site folder the process sees as installed (as the worker's ``survey`` does)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(libraries, "INSTALLED", (os.path.realpath(site) + os.sep,))
    return site


def test_a_distribution_is_keyed_by_its_name_version_and_record_hash(installed: Path, tmp_path: Path) -> None:
    record = _distribution(installed)
    bar = os.path.realpath(installed / "foo" / "bar.py")
    assert libraries.record_of(bar) == os.path.realpath(record)  # every module of it: one unit
    state = keys.unit_state(str(record))
    assert state == f"dist foo 1.2 sha256:{hashlib.sha256(record.read_bytes()).hexdigest()}"
    st = record.stat()
    for machine_specific in (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns):
        assert str(machine_specific) not in state and f"{machine_specific:x}" not in state

    # The same install elsewhere (other inodes, other times): the same state.
    copy = tmp_path / "elsewhere"
    shutil.copytree(installed, copy)
    os.utime(copy / "foo-1.2.dist-info" / "RECORD", (1, 1))
    assert keys.unit_state(str(copy / "foo-1.2.dist-info" / "RECORD")) == state


def test_a_file_no_record_lists_is_its_own_unit_and_a_later_install_is_found(installed: Path) -> None:
    _distribution(installed)
    stray = installed / "foo" / "extra.py"  # put there by hand: the RECORD does not vouch for it
    stray.write_text("Y = 2\n")
    assert libraries.record_of(os.path.realpath(stray)) is None
    later = _distribution(installed, "baz", "3.0")  # installed while the worker runs
    assert libraries.record_of(os.path.realpath(installed / "baz" / "bar.py")) == os.path.realpath(later)


def test_a_module_file_is_keyed_by_its_bytes_not_its_metadata(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("X = 1\n")
    b.write_text("X = 1\n")
    os.utime(b, (5, 5))
    assert keys.unit_state(str(a)) == keys.unit_state(str(b)) == "sha256:" + hashlib.sha256(b"X = 1\n").hexdigest()
    before = a.stat()
    with open(a, "r+") as f:  # same size, same inode, its modification time put back
        f.write("X = 2\n")
    os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert keys.unit_state(str(a)) == "sha256:" + hashlib.sha256(b"X = 2\n").hexdigest()
    assert keys.unit_state(str(tmp_path / "gone.py")) is None


# A job's dependencies, computed in a fresh interpreter as a worker's job does, with
# the library imported by the job itself or preloaded by the worker before it: the
# same units and states either way, and never a module the project's code does not
# reach (``mylib.other`` and ``otherlib``, preloaded beside it for another model).
JOB = """
import json, os, sys, time
site, project, preload = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
sys.path.insert(0, site)
from exportlens.core.export import libraries
libraries.survey()  # the worker's start
if preload:
    since = time.time_ns()
    import mylib.other, mylib.blocks, otherlib
    libraries.hold(since)
libraries.reset()  # the job starts
sys.path.insert(0, project)
with libraries.watching(project):
    import model
print(json.dumps(libraries.depended_on(project)))
"""

SITE = {
    "mylib/__init__.py": "",
    "mylib/blocks.py": "import helperlib\nfrom .util import scale\n\n\nclass Block:\n    pass\n",
    "mylib/util.py": "def scale():\n    from helper2 import K  # a lazy import: run in the job\n    return K\n",
    "mylib/other.py": "import otherlib\n",
    "helperlib.py": "",
    "helper2.py": "K = 2\n",
    "otherlib.py": "",
}


def test_a_job_depends_on_what_its_imports_reach_whether_or_not_preloaded(tmp_path: Path) -> None:
    site, project = tmp_path / "site", tmp_path / "proj"
    for name, text in SITE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    project.mkdir()
    (project / "model.py").write_text("from mylib.blocks import Block, scale\n\nWIDTH = scale()\n")
    time.sleep(1.1)  # written well before any import: none "changed while it was imported"

    def job(preload: bool) -> dict[str, str]:
        run = subprocess.run([sys.executable, "-c", textwrap.dedent(JOB), str(site), str(project), "1" if preload else "0"], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return dict(json.loads(run.stdout))

    fresh, preloaded = job(False), job(True)
    real = os.path.realpath(site)
    expected = {os.path.join(real, n): "sha256:" + hashlib.sha256(SITE[n].encode()).hexdigest() for n in ("mylib/__init__.py", "mylib/blocks.py", "mylib/util.py", "helperlib.py", "helper2.py")}
    assert fresh == expected
    assert preloaded == expected
