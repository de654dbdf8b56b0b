"""Paths written the same on every machine (``exportlens.core.cache.portable``): a
project's folder and the environment's as tokens, put back by the reader."""

from __future__ import annotations

import sys
from pathlib import Path

from exportlens.core.cache.keys import first_key
from exportlens.core.cache.portable import PREFIX, ROOT, Places
from exportlens.core.model.request import ExportRequest, Limits
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import unpack
from tests.core.serde.documents import pack, program_doc


def test_a_path_under_the_root_is_written_relative_and_put_back_under_another() -> None:
    here, there = Places("/home/alice/proj"), Places("/runner/work/proj")
    text = 'File "/home/alice/proj/pkg/model.py", line 3 (see /home/alice/proj)'
    portable = here.portable(text)
    assert "/home/alice" not in portable and portable.count(ROOT) == 2
    assert there.local(portable) == 'File "/runner/work/proj/pkg/model.py", line 3 (see /runner/work/proj)'


def test_only_whole_folders_match() -> None:
    places = Places("/a/proj")
    assert places.portable("/a/proj2/m.py /a/proj.old/m.py /a/proj-x") == "/a/proj2/m.py /a/proj.old/m.py /a/proj-x"
    assert places.portable("/a/proj/m.py:3") == ROOT + "/m.py:3"


def test_the_longest_folder_wins_an_environment_inside_the_project() -> None:
    places = Places(sys.prefix.rsplit("/", 1)[0])  # the project holds the interpreter's prefix
    site = f"{sys.prefix}/lib/site-packages/torch/nn/modules/module.py"
    assert places.portable(site).startswith(PREFIX + "/lib/")


def test_a_path_outside_every_folder_stays_absolute_and_no_root_cannot_be_put_back() -> None:
    assert Places("/a/proj").portable("/srv/data/x.bin") == "/srv/data/x.bin"
    try:
        Places(None).local(ROOT + "/m.py")
    except ValueError as e:
        assert "root" in str(e)
    else:
        raise AssertionError("a root-relative path placed without a root")


def test_strings_inside_program_bytes_and_nested_fields_move_too() -> None:
    doc = program_doc()
    doc[S.P_STRINGS] = [s.replace('"m.py"', '"/home/alice/proj/m.py"') for s in doc[S.P_STRINGS]]
    plain = {"path": "/home/alice/proj/m.py", "targets": [{"program": pack(doc), "graph": "# /home/alice/proj/m.py:3"}], "elapsed_ms": 1.0}
    portable = Places("/home/alice/proj").portable_plain(plain)
    assert b"/home/alice" not in portable["targets"][0]["program"]
    back = Places("/other/proj").local_plain(portable)
    assert back["path"] == "/other/proj/m.py" and back["targets"][0]["graph"] == "# /other/proj/m.py:3"
    strings = unpack(back["targets"][0]["program"])[S.P_STRINGS]
    assert 'File "/other/proj/m.py", line 3, in forward\n    return x + self.w' in strings
    # A program with nothing to move keeps its bytes exactly.
    same = pack(program_doc())
    assert Places("/home/alice/proj").portable_plain({"program": same})["program"] is same


def test_what_holds_no_path_is_given_back_as_it_is_and_the_rest_is_put_back() -> None:
    """A program's table is ~300,000 values, mostly numbers (a 70B model's): the walk
    copies only what holds a path to put back, the rest is the very same object."""
    nodes = [[i, [i, i + 1.5, None, True], {"n": [i]}] for i in range(50)]
    plain = {"nodes": nodes, "deep": [[1, [2, ["\x00root\x00/m.py:3"]]], 4], "elapsed_ms": 1.0}
    back = Places("/other/proj").local_plain(plain)
    assert back["deep"] == [[1, [2, ["/other/proj/m.py:3"]]], 4]
    assert back["nodes"] is nodes and back["elapsed_ms"] == 1.0
    assert plain["deep"] == [[1, [2, ["\x00root\x00/m.py:3"]]], 4]  # what was read is left as it was
    untouched = {"nodes": nodes}
    assert Places("/other/proj").local_plain(untouched) is untouched


def test_checkouts_at_other_paths_have_the_same_keys(tmp_path: Path) -> None:
    """The first key of a file with pyproject targets (absolute entries once read), the
    same in two checkouts; and another file's differs."""
    keys = []
    for where in ("a/proj", "b/deeper/proj"):
        root = tmp_path / where
        root.mkdir(parents=True)
        (root / "pyproject.toml").write_text('[tool.exportlens]\ntargets = ["models.py:make"]\n')
        (root / "models.py").write_text("def make():\n    return None\n")
        request = ExportRequest(id=0, path=str(root / "models.py"), root=str(root), limits=Limits(30.0, 2048))
        keys.append(first_key(request, b"def make():\n    return None\n"))
        other = ExportRequest(id=0, path=str(root / "other.py"), root=str(root), limits=Limits(30.0, 2048))
        keys.append(first_key(other, b"def make():\n    return None\n"))
    assert keys[0] == keys[2] and keys[1] == keys[3] and keys[0] != keys[1]
