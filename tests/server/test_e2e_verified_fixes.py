"""The fixes of issue 45 through the real server and a real LSP client, on files of the
fix corpus (``tests/corpus/fixes``): the diagnostics come first, the fixes once the
server verified them (``exportlens/fixesVerified``); each offered fix is applied as an
editor applies it, saved, and the diagnostic is gone with no new error. A fix whose
edit is in another file (a dataclass registered in its own module) edits that file;
a fix that changes the outputs is offered, never preferred; the next edit cancels a
verification that is still running.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types

from tests.server.lsp_client import Doc, RecordingClient, running_server
from tests.server.test_e2e_quick_fixes import actions_for, apply, errors, fix_and_export

pytestmark = pytest.mark.asyncio(loop_scope="module")

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "fixes"

Session = tuple[RecordingClient, Path]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    workspace = tmp_path_factory.mktemp("verified")
    shutil.copytree(CORPUS, workspace, dirs_exist_ok=True)
    options = {"cache_dir": str(workspace / ".cache"), "debounce_ms": 60_000}
    async with running_server("visual-studio-code", workspace, options) as (client, _):
        yield client, workspace


async def opened(session: Session, name: str, code: str) -> tuple[Doc, types.Diagnostic]:
    client, workspace = session
    doc = Doc(client, workspace / name)
    doc.open()
    found = await client.diagnostics_for(doc.uri, 1)
    [d] = [x for x in found if x.code == code]
    return doc, d


@pytest.mark.parametrize(
    ("name", "code", "title", "added"),
    [
        ("strided_frames.py", "data-dependent", "torch._check(step > 0)", "        torch._check(step > 0)\n"),
        ("pad_to_longest.py", "data-dependent", "without `int(...)`", "longest = lengths.max().item() + 1"),
        ("custom_op.py", "export-error", "fake kernel", "@scaled_gelu.register_fake"),
        ("layerdrop_strict.py", "export-error", "strict=False", "strict = False"),
        ("partial_shapes.py", "export-error", "dynamic_shapes", '"bias": None'),
        ("running_average.py", "banned-mutation/tensor-attribute", "as a buffer", "self.register_buffer('average'"),
    ],
)
async def test_a_verified_fix_applied_and_saved_removes_its_diagnostic(session: Session, name: str, code: str, title: str, added: str) -> None:
    doc, d = await opened(session, name, code)
    action, after = await fix_and_export(doc, d, title)
    assert action.is_preferred, action.title
    assert added in doc.text
    assert code not in [str(x.code) for x in after] and not errors(after), after


async def test_a_value_branch_gets_where_preferred_and_cond_not(session: Session) -> None:
    doc, d = await opened(session, "gated_residual.py", "data-dependent")
    actions = await actions_for(doc, d)
    assert [(a.title.split("`")[3].split("(")[0], bool(a.is_preferred)) for a in actions] == [("torch.where", True), ("torch.cond", False)]
    version = apply(doc, actions[0])
    doc.save()
    after = await doc.client.diagnostics_for(doc.uri, version)
    assert not errors(after)


async def test_a_dataclass_in_its_own_module_is_registered_there(session: Session) -> None:
    client, workspace = session
    doc, d = await opened(session, "batch_input.py", "unsupported-type")
    [action] = await actions_for(doc, d)
    assert action.is_preferred and "`batch.py`" in action.title
    assert action.edit is not None and action.edit.document_changes is not None
    [change] = action.edit.document_changes
    assert isinstance(change, types.TextDocumentEdit) and change.text_document.uri == (workspace / "blocks" / "batch.py").as_uri()
    # The editor opens blocks/batch.py, applies the edit and saves it: the declaring
    # file's export read that module, so the server exports it again by itself.
    module = workspace / "blocks" / "batch.py"
    [edit] = change.edits
    assert isinstance(edit, types.TextEdit)
    lines = module.read_text().split("\n")
    line = lines[edit.range.start.line]
    lines[edit.range.start.line] = line[: edit.range.start.character] + edit.new_text + line[edit.range.end.character :]
    before = len(client.publishes(doc.uri))
    module.write_text("\n".join(lines))
    assert "torch.export.register_dataclass(TokenBatch" in module.read_text()

    def republished() -> tuple[list[types.Diagnostic]] | None:
        later = client.publishes(doc.uri)[before:]
        return (list(later[-1].diagnostics),) if later and not any(x.code == "unsupported-type" for x in later[-1].diagnostics) else None

    [after] = await client.until(republished, "batch_input.py exported again without unsupported-type")
    assert not errors(after)


async def test_a_fix_that_changes_the_outputs_is_offered_not_preferred(session: Session) -> None:
    doc, d = await opened(session, "training_mode.py", "training-mode")
    [action] = await actions_for(doc, d)
    assert not action.is_preferred and "changes the outputs" in action.title


async def test_no_fix_where_none_verifies(session: Session) -> None:
    doc, d = await opened(session, "split_by_lengths.py", "data-dependent")
    assert await doc.client.fixes_verified(doc.uri, 1) == 0
    assert await actions_for(doc, d) == []


async def test_an_edit_cancels_the_verification_and_the_next_result_gets_its_own(session: Session) -> None:
    client, _ = session
    doc = Doc(client, session[1] / "positive_coords.py")
    doc.open()
    [d] = [x for x in await client.diagnostics_for(doc.uri, 1) if x.code == "data-dependent"]
    # An edit right away: the fixes of version 1 are for a text that is gone.
    version = doc.replace("count = len(coords)", "count = len(coords)  # the number of positive cells")
    doc.save()
    after = await client.diagnostics_for(doc.uri, version)
    [again] = [x for x in after if x.code == "data-dependent"]
    [action] = await actions_for(doc, again)
    assert action.is_preferred and "coords.shape[0]" in action.title
    assert all(v[1] != version or v[2] == 1 for v in client.verified if v[0] == doc.uri)
