"""A local module's index as ``UserSources`` reads it from disk."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.source.project import UserSources
from exportlens.core.source.sourcemap import SourceIndex


def test_a_module_saved_with_a_bom_is_indexed(tmp_path: Path) -> None:
    # "UTF-8 with BOM" (Windows editors): Python imports it, so the index must read it too;
    # with the BOM kept as a character ast refuses line 1 and the module had no classes.
    module = tmp_path / "layers.py"
    module.write_bytes(b"\xef\xbb\xbfimport torch\r\n\r\n\r\nclass Block(torch.nn.Module):\r\n    pass\r\n")
    sources = UserSources(SourceIndex.build("", str(tmp_path / "main.py")), str(tmp_path))
    index = sources.index(str(module))
    assert "Block" in index.classes and index.classes["Block"].where.line == 4
