"""A document's state has one owner of its mode (``server/state.py``): ``enter``
changes it and logs each change with its reason; nothing else assigns it."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from exportlens.core.model.results import FileResult
from exportlens.server.state import DocumentState, Mode

SERVER = Path(__file__).resolve().parents[2] / "server"


def test_enter_logs_each_change_once_with_its_reason(caplog: pytest.LogCaptureFixture) -> None:
    state = DocumentState(uri="file:///m.py", path="/m.py")
    assert (state.mode, state.declares, state.view, state.pyproject) == (Mode.IDLE, False, False, False)
    with caplog.at_level(logging.INFO, logger="exportlens.server.state"):
        state.enter(Mode.MODEL, "declares targets")
        state.enter(Mode.MODEL, "declares targets")  # no change: nothing said
        state.enter(Mode.VIEW, "targets that import it ran it")
    assert [r.getMessage() for r in caplog.records] == [
        "file:///m.py: idle -> model (declares targets)",
        "file:///m.py: model -> view (targets that import it ran it)",
    ]
    assert (state.declares, state.view) == (False, True)


def test_drop_result_drops_what_was_built_from_it() -> None:
    state = DocumentState(uri="u", path="/m.py", result=FileResult("/m.py"), index=object(), hints=object(), from_cache=True, from_store=True)
    state.drop_result()
    assert (state.result, state.index, state.hints, state.from_cache, state.from_store) == (None, None, None, False, False)


def test_no_server_module_but_the_state_assigns_a_document_s_mode() -> None:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        if path.name == "state.py" and path.parent == SERVER:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Attribute) and t.attr in ("mode", "declares", "view", "pyproject"):
                        found.append(f"{path.relative_to(SERVER.parent)}:{node.lineno} assigns .{t.attr}")
    assert found == [], "use DocumentState.enter: " + "; ".join(found)
