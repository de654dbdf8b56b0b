"""The library part of a result's key: which files a job depended on
(``library_units.depended_on``) and the state of each (``states.unit_state``), by content
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
from types import SimpleNamespace

import pytest

from exportlens.core.disk import states
from exportlens.core.export import libraries, library_units


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
    assert library_units.record_of(bar) == os.path.realpath(record)  # every module of it: one unit
    state = states.unit_state(str(record))
    assert state == f"dist foo 1.2 sha256:{hashlib.sha256(record.read_bytes()).hexdigest()}"
    st = record.stat()
    for machine_specific in (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns):
        assert str(machine_specific) not in state and f"{machine_specific:x}" not in state

    # The same install elsewhere (other inodes, other times): the same state.
    copy = tmp_path / "elsewhere"
    shutil.copytree(installed, copy)
    os.utime(copy / "foo-1.2.dist-info" / "RECORD", (1, 1))
    assert states.unit_state(str(copy / "foo-1.2.dist-info" / "RECORD")) == state


def test_a_file_no_record_lists_is_its_own_unit_and_a_later_install_is_found(installed: Path) -> None:
    _distribution(installed)
    stray = installed / "foo" / "extra.py"  # put there by hand: the RECORD does not vouch for it
    stray.write_text("Y = 2\n")
    assert library_units.record_of(os.path.realpath(stray)) is None
    later = _distribution(installed, "baz", "3.0")  # installed while the worker runs
    assert library_units.record_of(os.path.realpath(installed / "baz" / "bar.py")) == os.path.realpath(later)


def test_a_module_file_is_keyed_by_its_bytes_not_its_metadata(tmp_path: Path) -> None:
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("X = 1\n")
    b.write_text("X = 1\n")
    os.utime(b, (5, 5))
    assert states.unit_state(str(a)) == states.unit_state(str(b)) == "sha256:" + hashlib.sha256(b"X = 1\n").hexdigest()
    before = a.stat()
    with open(a, "r+") as f:  # same size, same inode, its modification time put back
        f.write("X = 2\n")
    os.utime(a, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert states.unit_state(str(a)) == "sha256:" + hashlib.sha256(b"X = 2\n").hexdigest()
    assert states.unit_state(str(tmp_path / "gone.py")) is None


def test_metadata_vouches_for_content_only_once_it_is_older_than_the_clocks_granularity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system whose times move in ticks (older kernels, FAT) can leave a file's
    metadata as it was after a write: a state remembered by metadata that recent would
    be served stale. Stat is made to say the same thing before and after the write."""
    a = tmp_path / "a.py"
    a.write_text("X = 1\n")
    frozen = os.stat(a)
    monkeypatch.setattr(states.os, "stat", lambda path, *args, **kw: frozen if path == str(a) else os.lstat(path))
    assert states.unit_state(str(a)) == "sha256:" + hashlib.sha256(b"X = 1\n").hexdigest()
    a.write_text("X = 2\n")  # written within the same tick: the metadata has not moved
    assert states.unit_state(str(a)) == "sha256:" + hashlib.sha256(b"X = 2\n").hexdigest()

    # Metadata older than that vouches: an unchanged unit costs a stat, not a read.
    old = time.time_ns() - 10 * states.RACY_NS
    st = os.stat(a)
    aged = SimpleNamespace(st_dev=st.st_dev, st_ino=st.st_ino, st_size=st.st_size, st_mtime_ns=old, st_ctime_ns=old)
    monkeypatch.setattr(states.os, "stat", lambda path, *args, **kw: aged)
    monkeypatch.setattr(states, "_sha256", lambda path: "read")
    states._unit_memo.pop(str(a), None)
    assert states.unit_state(str(a)) == "sha256:read"  # taken and remembered
    monkeypatch.setattr(states, "_sha256", lambda path: "read again")
    assert states.unit_state(str(a)) == "sha256:read"


def test_a_site_folder_is_read_again_while_its_time_is_too_recent_to_vouch(installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two installs within one tick of a coarse clock leave the folder's time as it was:
    the second is still found."""
    _distribution(installed)
    frozen = os.stat(installed)
    real_stat = os.stat
    monkeypatch.setattr(library_units.os, "stat", lambda path, *args, **kw: frozen if str(path) == str(installed) or os.path.realpath(path) == os.path.realpath(installed) else real_stat(path, *args, **kw))
    assert library_units.record_of(os.path.realpath(installed / "foo" / "bar.py")) is not None
    later = _distribution(installed, "baz", "3.0")
    assert library_units.record_of(os.path.realpath(installed / "baz" / "bar.py")) == os.path.realpath(later)


# A job's dependencies, computed in a fresh interpreter as a worker's job does, with
# the library imported by the job itself or preloaded by the worker before it: the
# same units and states either way, and never a module the project's code does not
# reach (``mylib.other`` and ``otherlib``, preloaded beside it for another model).
JOB = """
import json, os, sys, time
site, project, preload, model = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
sys.path.insert(0, site)
from exportlens.core.export import libraries, library_units
libraries.survey()  # the worker's start
if preload:
    since = time.time_ns()
    import mylib.other, mylib.blocks, biglib, otherlib
    libraries.hold(since)
    library_units.learn()  # the worker's walks
libraries.reset()  # the job starts
sys.path.insert(0, project)
with libraries.watching(project):
    __import__(model)
# whether the worker's walks could be used: nothing left sys.modules since they were taken
print(json.dumps([library_units.depended_on(project), library_units._added() is not None]))
"""

SITE = {
    "mylib/__init__.py": "",
    "mylib/blocks.py": "import helperlib\nfrom .util import scale\n\n\nclass Block:\n    pass\n",
    "mylib/util.py": "def scale():\n    from helper2 import K  # a lazy import: run in the job\n    return K\n",
    "mylib/other.py": "import otherlib\n",
    "helperlib.py": "",
    "helper2.py": "K = 2\n",
    # A package that imports its modules, as transformers does: the worker's walk from
    # it covers them. ``extra`` is an attribute when facade imports it, and a module
    # once go() ran: a name that held no module when the worker walked, and holds one
    # in the job through an edge the worker knew. later() imports in the job: an edge
    # the worker's walk did not have.
    "biglib/__init__.py": "extra = None\nfrom . import facade, lazy\n",
    "biglib/facade.py": "import importlib\n\nfrom biglib import extra\n\n\ndef go():\n    return importlib.import_module('biglib.extra')\n",
    "biglib/extra.py": "import helper3\n",
    "biglib/lazy.py": "def later():\n    from helper4 import K\n    return K\n",
    "helper4.py": "K = 4\n",
    "helper3.py": "",
    "otherlib.py": "",
}


MODELS = {
    "model": "from mylib.blocks import Block, scale\nfrom biglib.facade import go\nfrom biglib.lazy import later\n\nWIDTH = scale()\ngo()\nlater()\n",
    # A module taken out of sys.modules: the worker's walks no longer hold.
    "dropping": "import sys\n\nsys.modules.pop('mylib.other', None)\nfrom mylib.blocks import Block, scale\nfrom biglib.facade import go\nfrom biglib.lazy import later\n\nWIDTH = scale()\ngo()\nlater()\n",
}


@pytest.mark.parametrize("model", list(MODELS))
def test_a_job_depends_on_what_its_imports_reach_whether_or_not_preloaded(tmp_path: Path, model: str) -> None:
    site, project = tmp_path / "site", tmp_path / "proj"
    for name, text in SITE.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    project.mkdir()
    (project / f"{model}.py").write_text(MODELS[model])
    time.sleep(1.1)  # written well before any import: none "changed while it was imported"

    def job(preload: bool) -> tuple[dict[str, str], bool]:
        run = subprocess.run([sys.executable, "-c", textwrap.dedent(JOB), str(site), str(project), "1" if preload else "0", model], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        found, walked = json.loads(run.stdout)
        return dict(found), walked

    (fresh, _), (preloaded, walked) = job(False), job(True)
    assert walked is (model == "model")
    real = os.path.realpath(site)
    reached = ("mylib/__init__.py", "mylib/blocks.py", "mylib/util.py", "helperlib.py", "helper2.py", "biglib/__init__.py", "biglib/facade.py", "biglib/lazy.py", "biglib/extra.py", "helper3.py", "helper4.py")
    expected = {os.path.join(real, n): "sha256:" + hashlib.sha256(SITE[n].encode()).hexdigest() for n in reached}
    assert fresh == expected
    assert preloaded == expected
