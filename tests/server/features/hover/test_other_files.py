"""Hover in the declaring file about code in a local module (issue 22): every line a
hover names says its file when it is not the hovered one (``blocks.py:10``, as the
CLI's ``mymodels/blocks.py:10``), and a module's line never anchors a hover at the
same number of the declaring file."""

from __future__ import annotations

from pathlib import Path

from exportlens.core.model.results import Diagnostic, FileResult, TargetResult
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, SourceLine, TensorMeta
from exportlens.server.features.hover.index import HoverIndex
from exportlens.server.markup import MARKDOWN
from tests.workspaces import MYMODELS_NET, mymodels_workspace


def _tensor(name: str, shape: tuple[int, ...]) -> ArgSpec:
    return ArgSpec("tensor", name, meta=TensorMeta("float32", shape, "cpu"))


def _result(net: Path) -> FileResult:
    blocks = str((net.parent / "blocks.py").resolve())
    sig = Signature(
        inputs=(
            InputSpec("PARAMETER", _tensor("p_block_fc_weight", (8, 8)), target="block.fc.weight", source=SourceLine(10, 9, 10, 34, path=blocks)),
            InputSpec("USER_INPUT", _tensor("x", (2, 8)), source=SourceLine(14, 24, 14, 25)),
        ),
        outputs=(OutputSpec("USER_OUTPUT", _tensor("linear", (2, 8)), source=SourceLine(15, 9, 15, 29)),),
    )
    failed = Diagnostic("data-dependent", "`if x.sum() > 0:` depends on ...", 20, 9, 20, 24, target="broken", path=blocks)
    return FileResult(
        path=str(net),
        diagnostics=(failed,),
        targets=(TargetResult("make_net", 18, "ok", 10.0, sig), TargetResult("broken", 18, "error")),
    )


def _hover(index: HoverIndex, text: str, line: int, needle: str) -> str | None:
    found = index.hover(line - 1, text.split("\n")[line - 1].index(needle))
    return found.text if found is not None else None


def test_the_targets_hover_names_the_modules_lines_with_their_file(tmp_path: Path) -> None:
    net = mymodels_workspace(tmp_path)
    index = HoverIndex.build(str(net), MYMODELS_NET, _result(net), MARKDOWN)
    hover = _hover(index, MYMODELS_NET, 18, "def make_net")
    assert hover is not None
    weight = next(row for row in hover.splitlines() if row.startswith("p_block_fc_weight"))
    assert weight.endswith("blocks.py:10"), weight  # not "line 10": net.py's line 10 is `def __init__`
    assert next(row for row in hover.splitlines() if row.startswith("x:")).endswith("line 14")
    assert "**`data-dependent`** blocks.py:20: " in hover


def test_a_modules_line_anchors_nothing_at_that_number_here(tmp_path: Path) -> None:
    net = mymodels_workspace(tmp_path)
    index = HoverIndex.build(str(net), MYMODELS_NET, _result(net), MARKDOWN)
    assert MYMODELS_NET.split("\n")[9].strip() == "def __init__(self) -> None:"
    assert _hover(index, MYMODELS_NET, 10, "def") is None and _hover(index, MYMODELS_NET, 10, "__init__") is None
