"""Emacs 28 with eglot 1.9 (Debian's ``emacs-nox`` and ``elpa-eglot``), typed into as
a user types, on a real terminal: the configuration docs/editors.md gives
(``emacs/init.el``) and nothing else of exportlens' own.

``emacs -nw`` runs on a pty (``terminal.Terminal``); ``emacs/probe.el`` reports
what Emacs holds (``terminal_clients.Probe``). The session: open a model file (the
diagnostics at the lines ``exportlens check`` reports), read the documentation at
two places (eldoc's hover: plain text, since eglot 1.9 asks for it when markdown-mode
is not installed, and no markdown syntax on the screen), apply the quick fix with
``M-x eglot-code-actions`` and save (the diagnostic gone after the new export), type
a data-dependent branch into another file (its diagnostic appears, unsaved), quit
with ``C-x C-c`` (the server and its workers gone).
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

HERE = Path(__file__).resolve().parent / "emacs"
INIT = HERE / "init.el"
PROBE = HERE / "probe.el"

# Keys as a terminal sends them.
M_X, GOTO_LINE, BUFFER_START = "\x1bx", "\x1bgg", "\x1b<"
C_E, C_X, C_S, C_F, C_C, C_H = "\x05", "\x18", "\x13", "\x06", "\x03", "\x08"

# The prompts of C-x C-c with an unsaved buffer, and the answers (a process that
# asks for confirmation too, should any).
QUIT_PROMPTS = {
    "Save file": "n",
    "Modified buffers exist; exit anyway? (yes or no)": "yes\r",
    "Active processes exist; kill them and exit anyway? (yes or no)": "yes\r",
}


@pytest.fixture(scope="module")
def kit() -> dict[str, str]:
    return editors()


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[int, str]]]:
    return expected_diagnostics(tmp_path_factory.mktemp("emacs-expected"))


def buffer(state: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((b for b in state["buffers"] if b["name"] == name), None)


def shown(state: dict[str, Any], name: str, want: list[tuple[int, str]]) -> dict[str, Any] | None:
    """The buffer ``name`` once its diagnostics are ``want`` (line, code)."""
    b = buffer(state, name)
    return b if b is not None and b["managed"] and lines_and_codes(b["diagnostics"]) == want else None


def has(text: str) -> Any:
    return lambda lines: any(text in line for line in lines)


def no_markdown(text: str) -> bool:
    return not any(m in text for m in MARKDOWN_SYNTAX)


def test_eglot_diagnostics_hover_quick_fix_edit_and_exit(kit: dict[str, str], expected: dict[str, list[tuple[int, str]]], tmp_path: Path) -> None:
    project = new_project(tmp_path / "project")
    state_file = tmp_path / "state.json"
    env = editor_env(tmp_path, EXPORTLENS_EMACS_PYTHON=sys.executable, EXPORTLENS_EMACS_STATE=str(state_file))
    command = [kit["EMACS"], "-nw", "-q", "-l", str(INIT), "-l", str(PROBE), "dynamic_shapes.py"]
    term = Terminal(command, cwd=project, env=env, columns=120, lines=40)
    probe = Probe(term, state_file)
    exited: int | None = None
    try:
        term.wait_for(has("dynamic_shapes.py"), 60, "Emacs visiting dynamic_shapes.py")
        # eglot-ensure connects after the next command, as after any a user types first.
        term.type(BUFFER_START)
        opened = probe.until(lambda s: shown(s, "dynamic_shapes.py", expected["dynamic_shapes.py"]), FIRST_EXPORT_S, "the CLI's diagnostics in dynamic_shapes.py")
        [violation] = opened["diagnostics"]
        assert "\n" in violation["message"]  # a message of several lines, as the server sent it

        # Hover: eldoc asks after point moves (M-g g), and C-h . shows its buffer.
        term.type(f"{GOTO_LINE}7\r")
        doc = probe.until(lambda s: s["doc"] if "torch specialised it" in s["doc"] else None, EXPORT_S, "the documentation of the Dim declaration")
        formats = probe.read()["hover_formats"]  # type: ignore[index]
        assert no_markdown(doc), f"eglot asked for {formats}; the documentation shows markdown syntax:\n{doc}"
        assert doc.startswith("Dim batch · Reshaper · torch specialised it\n"), doc
        assert "line 12 · if x.shape[0] == 4: · this code specialises the dimension" in doc and "Suggested fixes:\n  batch = 4" in doc, doc
        term.type(f"{C_H}.")
        screen = term.wait_for(has("Dim batch · Reshaper · torch specialised it"), EXPORT_S, "the documentation buffer")
        assert no_markdown("\n".join(screen)), "\n".join(screen)
        term.type(f"{C_X}1")  # back to one window

        term.type(f"{GOTO_LINE}10\r")
        doc = probe.until(lambda s: s["doc"] if "· export error" in s["doc"] else None, EXPORT_S, "the documentation of the class line")
        assert no_markdown(doc) and re.match(r"Reshaper · export error after \d+ ms\n\n", doc) and "\n\nconstraint-violation line 7: " in doc, doc

        # The quick fix: M-x eglot-code-actions, RET for the default (the preferred fix), save.
        term.type(f"{GOTO_LINE}7\r")
        term.type(f"{M_X}eglot-code-actions\r")
        term.wait_for(has("Pick an action (default make `batch` static (= 4)"), EXPORT_S, "eglot's choice of actions")
        term.type("\r")
        probe.until(lambda s: (b := buffer(s, "dynamic_shapes.py")) and FIXED_DIM[1] in b["text"].split("\n"), EXPORT_S, "the fix in the buffer")
        term.type(f"{C_X}{C_S}")
        fixed = probe.until(lambda s: (b := shown(s, "dynamic_shapes.py", expected["fixed/dynamic_shapes.py"])) and not b["modified"] and b, EXPORT_S, "no diagnostic after the fix")
        assert fixed["text"] == (project / "dynamic_shapes.py").read_text() and FIXED_DIM[0] not in fixed["text"]

        # An edit: a branch on a tensor's value typed into counter.py, not saved.
        term.type(f"{C_X}{C_F}counter.py\r")
        probe.until(lambda s: shown(s, "counter.py", expected["counter.py"]), EXPORT_S, "the CLI's diagnostics in counter.py")
        term.type(f"{GOTO_LINE}13\r{C_E}\r")  # after `def forward(self, x):`; RET indents (electric-indent-mode)
        term.type(f"{BRANCH[0].strip()}\r{BRANCH[1].strip()}")
        want = with_branch((project / "counter.py").read_text())
        probe.until(lambda s: (b := buffer(s, "counter.py")) and b["text"] == want, EXPORT_S, "the branch typed into counter.py")
        edited = probe.until(lambda s: shown(s, "counter.py", expected["branched/counter.py"]), EXPORT_S, "the data-dependent diagnostic of the typed branch")
        assert edited["modified"]

        # No error in the client: nothing but eglot's own progress in *Messages*.
        messages = probe.read()["messages"]  # type: ignore[index]
        assert not re.search(r"error|warning|exportlens-probe", messages, re.I), messages

        # C-x C-c, as a user quits with an unsaved buffer and a running server.
        term.type(f"{C_X}{C_C}")
        answered: set[str] = set()

        def answer(lines: list[str]) -> None:
            for prompt, reply in QUIT_PROMPTS.items():
                if prompt not in answered and any(prompt in line for line in lines[-3:]):
                    answered.add(prompt)
                    term.type(reply)

        exited = term.wait_exit(answer, 60)
        assert "Save file" in answered, answered  # (eglot's server process asks no confirmation: jsonrpc makes it :noquery)
    finally:
        code = term.close(timeout=30)
        left = leftovers(env[MARK])  # waited for, then killed: never left behind by a failure
    assert exited == 0 and code == 0, (exited, code)
    assert not left, f"processes still running {EXIT_GRACE_S:g} s after Emacs exited: {left}"
