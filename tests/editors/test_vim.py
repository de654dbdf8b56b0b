"""Vim 9 with ALE 3.3 (Debian's ``vim`` and ``vim-ale``), typed into as a user
types, on a real terminal: the configuration docs/editors.md gives (``vim/vimrc``)
and nothing else of exportlens' own.

``vim`` runs on a pty (``terminal.Terminal``); ``vim/probe.vim`` reports what Vim
holds (``terminal_clients.Probe``). The session: open a model file (the diagnostics
at the lines ``exportlens check`` reports), ``:ALEHover`` twice (ALE asks for plain
text only: no error, the cursor back in the file, no markdown syntax in the preview
window), ``:ALECodeAction`` on the constraint violation -- whose message ALE keeps
on one line, so the server must find the diagnostic without it -- then ``:w`` (the
diagnostic gone after the new export), type a data-dependent branch into another
file (its diagnostic appears, unsaved), ``:qa!`` (the server and its workers gone).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.editors.terminal import Terminal
from tests.editors.terminal_clients import (
    BRANCH,
    EXIT_GRACE_S,
    EXPORT_S,
    FIRST_EXPORT_S,
    FIXED_DIM,
    MARK,
    MARKDOWN_SYNTAX,
    Probe,
    editor_env,
    editors,
    expected_diagnostics,
    leftovers,
    lines_and_codes,
    new_project,
    with_branch,
)

HERE = Path(__file__).resolve().parent / "vim"
VIMRC = HERE / "vimrc"
PROBE = HERE / "probe.vim"
ESC = "\x1b"


@pytest.fixture(scope="module")
def kit() -> dict[str, str]:
    return editors()


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    return expected_diagnostics(tmp_path_factory.mktemp("vim-expected"))


def buffer(state: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((b for b in state["buffers"] if b["name"] == name), None)


def shown(state: dict[str, Any], name: str, want: list[tuple[int, str]]) -> dict[str, Any] | None:
    """The buffer ``name`` once ALE shows ``want`` (line, code) for it."""
    b = buffer(state, name)
    return b if b is not None and lines_and_codes(b["diagnostics"]) == want else None


def has(text: str) -> Any:
    return lambda lines: any(text in line for line in lines)


def no_markdown(text: str) -> bool:
    return not any(m in text for m in MARKDOWN_SYNTAX)


def hover(term: Terminal, probe: Probe, line: int, says: str) -> dict[str, Any]:
    """``{line}G`` then ``:ALEHover``: the state once the preview window says ``says``,
    checked as a user would see it: no error, the cursor still in the file, plain text."""
    term.type(f"{ESC}:pclose\r{line}G:ALEHover\r")
    state = probe.until(lambda s: s if any(says in row for row in s["preview"]) else None, EXPORT_S, f"the hover of line {line} in the preview window")
    text = "\n".join(state["preview"])
    assert not state["errmsg"] and not re.search(r"\bE\d+:", state["messages"]), f"Vim reported an error:\n{state['errmsg']}\n{state['messages']}"
    assert state["window"]["name"] == "dynamic_shapes.py" and not state["window"]["previewwindow"], state["window"]  # ALE's stay_here
    assert no_markdown(text), f"the hover shows markdown syntax:\n{text}"
    screen = term.wait_for(has(says), EXPORT_S, "the hover on the screen")
    assert no_markdown("\n".join(screen)), "\n".join(screen)
    return state


def test_ale_diagnostics_hover_quick_fix_edit_and_exit(kit: dict[str, str], expected: dict[str, list[tuple[int, str]]], tmp_path: Path) -> None:
    project = new_project(tmp_path / "project")
    state_file = tmp_path / "state.json"
    env = editor_env(tmp_path, EXPORTLENS_VIM_PYTHON=sys.executable, EXPORTLENS_VIM_STATE=str(state_file))
    command = [kit["VIM"], "-N", "-u", str(VIMRC), "-i", "NONE", "-S", str(PROBE), "dynamic_shapes.py"]
    term = Terminal(command, cwd=project, env=env, columns=120, lines=40)
    probe = Probe(term, state_file)
    exited: int | None = None
    try:
        opened = probe.until(lambda s: shown(s, "dynamic_shapes.py", expected["dynamic_shapes.py"]), FIRST_EXPORT_S, "the CLI's diagnostics in dynamic_shapes.py")
        [violation] = opened["diagnostics"]
        assert violation["message"].startswith("the declared dynamic_shapes are violated: Constraints violated (batch)!   - You marked")  # one line: ALE's

        # Hover twice: after an error the cursor would be left in the preview window.
        dim = hover(term, probe, 7, "torch specialised it")
        assert dim["preview"][0] == "Dim batch · Reshaper · torch specialised it", dim["preview"]
        target = hover(term, probe, 10, "· export error")
        assert re.fullmatch(r"Reshaper · export error after \d+ ms", target["preview"][0]), target["preview"]

        # The quick fix: ALE lists the actions and reads a number.
        term.type(f"{ESC}:pclose\r7G:ALECodeAction\r")
        screen = term.wait_for(lambda rows: has("Type number and <Enter>")(rows) or has("No code actions received")(rows), EXPORT_S, "ALE's list of code actions")
        choice = next((m.group(1) for row in screen if (m := re.match(r"(\d+)\) make `batch` static \(= 4\)", row))), None)
        assert choice is not None, "\n".join(screen)
        term.type(f"{choice}\r")
        probe.until(lambda s: (b := buffer(s, "dynamic_shapes.py")) and FIXED_DIM[1] in b["text"].split("\n"), EXPORT_S, "the fix in the buffer")
        term.type(":w\r")
        fixed = probe.until(lambda s: (b := shown(s, "dynamic_shapes.py", expected["fixed/dynamic_shapes.py"])) and not b["modified"] and b, EXPORT_S, "no diagnostic after the fix")
        assert fixed["text"] + "\n" == (project / "dynamic_shapes.py").read_text() and FIXED_DIM[0] not in fixed["text"]

        # An edit: a branch on a tensor's value typed into counter.py, not saved.
        term.type(":edit counter.py\r")
        probe.until(lambda s: shown(s, "counter.py", expected["counter.py"]), EXPORT_S, "the CLI's diagnostics in counter.py")
        term.type(f"13Go{BRANCH[0]}\r{BRANCH[1]}{ESC}")
        want = with_branch((project / "counter.py").read_text())
        probe.until(lambda s: (b := buffer(s, "counter.py")) and b["text"] + "\n" == want, EXPORT_S, "the branch typed into counter.py")
        edited = probe.until(lambda s: shown(s, "counter.py", expected["branched/counter.py"]), EXPORT_S, "the data-dependent diagnostic of the typed branch")
        assert edited["modified"]

        state = probe.read()
        assert state is not None and not state["errmsg"] and not re.search(r"\bE\d+:", state["messages"]), state

        term.type(":qa!\r")
        exited = term.wait_exit(lambda lines: None, 60)
    finally:
        code = term.close(timeout=30)
        left = leftovers(env[MARK])  # waited for, then killed: never left behind by a failure
    assert exited == 0 and code == 0, (exited, code)
    assert not left, f"processes still running {EXIT_GRACE_S:g} s after Vim exited: {left}"
