"""Quick fixes through the real server and a real LSP client: each offered fix is
applied to the buffer as an editor applies it (the returned WorkspaceEdit as a
didChange), the buffer saved, and the new export must no longer report the
diagnostic, nor any new error. Also: no action where no fix would work, none for a
buffer that changed since the result, none in the declaring file for a diagnostic
whose code lives in a model module (the module gets it).

The debounce is a minute, so only opens and saves export: a test decides exactly
which text each result is for.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import AsyncIterator

import pytest
import pytest_asyncio
from lsprotocol import types

from exportlens.server.positions import UTF8, UTF16, units
from tests.server.lsp_client import Doc, RecordingClient, running_server

pytestmark = pytest.mark.asyncio(loop_scope="module")

Session = tuple[RecordingClient, Path]

ATTRIBUTE = '''\
import torch
from torch import nn


class Cache(nn.Module):
    """Keeps its last output (a tensor attribute, not a buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.last = torch.zeros(2, 4)

    def forward(self, x):
        y = self.fc(x)
        self.last = y * 2  # « dropped by export »
        return y
'''

RUNNING_MEAN = '''\
import torch
from torch import nn


class Normalizer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mean = torch.zeros(4)

    def forward(self, x):
        self.mean = self.mean * 0.9 + x.mean(0) * 0.1
        return x - self.mean


model = Normalizer()
example_args = (torch.randn(3, 4),)
'''

DIMS = '''\
import torch
from torch import nn
from torch.export import Dim


class Gated(nn.Module):
    def forward(self, x):
        if x.shape[0] > 8:
            return x * 2
        return x + 1


class Rows(nn.Module):
    def forward(self, x):
        return x.reshape(4, -1)


größe = Dim("batch")  # a non-ASCII name before the declaration's column
rows = Dim("rows", max=64)


@exportlens.target(dynamic_shapes={"x": {0: größe}})
def gated():
    return Gated(), (torch.randn(4, 3),)


@exportlens.target(dynamic_shapes={"x": {0: rows}})
def reshaped():
    return Rows(), (torch.randn(4, 3),)
'''.replace("from torch.export import Dim\n", "from torch.export import Dim\n\nimport exportlens\n")

METADATA = '''\
import torch
from torch import nn


class T(nn.Module):
    def forward(self, x, y):
        y.unsqueeze_(0)
        x.transpose_(0, 1)
        return x + 1, y


model = T()
example_args = (torch.randn(2, 3), torch.randn(3))
'''

PARAMETER = '''\
import torch
from torch import nn


class P(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.w.add_(1)
        return x * self.w


model = P()
example_args = (torch.randn(3),)
'''

HF = '''\
import torch
from transformers import GPT2Config, GPT2LMHeadModel

import exportlens


@exportlens.target
def gpt2():
    # A tiny GPT-2 from a config (no download); use_cache stays at its default.
    config = GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)
    return GPT2LMHeadModel(config).eval(), (torch.randint(0, 32, (2, 5)),)
'''


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["visual-studio-code", "neovim"])
async def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Session]:
    workspace = tmp_path_factory.mktemp(f"fixes-{request.param}")
    options = {"cache_dir": str(workspace / ".cache"), "debounce_ms": 60_000}
    async with running_server(request.param, workspace, options) as (client, result):
        provider = result.capabilities.code_action_provider
        assert isinstance(provider, types.CodeActionOptions) and list(provider.code_action_kinds or []) == [types.CodeActionKind.QuickFix]
        yield client, workspace


def _index(doc: Doc, position: types.Position) -> int:
    """An LSP position (the negotiated encoding) as an index into ``doc.text``."""
    lines = doc.text.split("\n")
    text, units, column = lines[position.line], 0, 0
    while column < len(text) and units < position.character:
        units += len(text[column].encode("utf-8" if doc.client.encoding == "utf-8" else "utf-16-le")) // (1 if doc.client.encoding == "utf-8" else 2)
        column += 1
    return sum(len(line) + 1 for line in lines[: position.line]) + column


def apply(doc: Doc, action: types.CodeAction) -> int:
    """Apply ``action``'s edit as an editor does: one didChange, edits last-first; the new version."""
    assert action.edit is not None
    if action.edit.document_changes:
        [change] = action.edit.document_changes
        assert isinstance(change, types.TextDocumentEdit) and change.text_document.uri == doc.uri
        assert change.text_document.version == doc.version  # the client refuses it for another version
        edits = list(change.edits)
    else:
        assert action.edit.changes is not None and set(action.edit.changes) == {doc.uri}
        edits = list(action.edit.changes[doc.uri])
    changes: list[types.TextDocumentContentChangeEvent] = []
    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        assert isinstance(edit, types.TextEdit)
        start, end = _index(doc, edit.range.start), _index(doc, edit.range.end)
        doc.text = doc.text[:start] + edit.new_text + doc.text[end:]
        changes.append(types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text))
    doc.version += 1
    doc.client.text_document_did_change(types.DidChangeTextDocumentParams(types.VersionedTextDocumentIdentifier(version=doc.version, uri=doc.uri), changes))
    return doc.version


async def actions_for(doc: Doc, diagnostic: types.Diagnostic) -> list[types.CodeAction]:
    """The code actions for ``diagnostic``, once the server verified the fixes of the
    result it was published with (each re-exported, its outputs compared)."""
    published = doc.client.publishes(doc.uri)
    if published and published[-1].version == doc.version:  # else the buffer moved on: no fix either way
        await doc.client.fixes_verified(doc.uri, doc.version)
    params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(doc.uri),
        range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=[types.CodeActionKind.QuickFix]),
    )
    found = await doc.client.text_document_code_action_async(params)
    out = [a for a in found or [] if isinstance(a, types.CodeAction)]
    for a in out:
        assert a.kind == types.CodeActionKind.QuickFix, a.kind
        assert list(a.diagnostics or []) == [diagnostic]
    return out


def errors(diagnostics: list[types.Diagnostic]) -> list[tuple[str, str]]:
    return [(str(d.code), d.message) for d in diagnostics if d.severity == types.DiagnosticSeverity.Error]


async def fix_and_export(doc: Doc, diagnostic: types.Diagnostic, title_has: str) -> tuple[types.CodeAction, list[types.Diagnostic]]:
    """Apply the one fix offered for ``diagnostic``, save, and return the new diagnostics."""
    [action] = await actions_for(doc, diagnostic)
    assert title_has in action.title, action.title
    version = apply(doc, action)
    doc.save()
    return action, await doc.client.diagnostics_for(doc.uri, version)


async def opened(session: Session, name: str, text: str, code: str | None = None) -> tuple[Doc, list[types.Diagnostic]]:
    """``text`` saved as ``name`` in the workspace and opened as an editor opens it;
    the document and the diagnostics of its first export (those of ``code`` only, when given)."""
    client, workspace = session
    path = workspace / name
    path.write_text(text)
    doc = Doc(client, path)
    doc.open()
    found = await client.diagnostics_for(doc.uri, 1)
    return doc, [x for x in found if code is None or x.code == code]


async def test_a_tensor_attribute_fix_registers_a_buffer(session: Session) -> None:
    doc, [d] = await opened(session, "cache_model.py", ATTRIBUTE + "\n\nmodel = Cache()\nexample_args = (torch.randn(2, 4),)\n", "banned-mutation/tensor-attribute")
    action, after = await fix_and_export(doc, d, "register `last` as a buffer")
    # The update's value is not in the program (nothing reads it): the title says what the fix needs.
    assert not action.is_preferred and "same shape needed" in action.title
    assert "self.register_buffer('last', torch.zeros(2, 4), persistent=False)" in doc.text
    assert [str(x.code) for x in after] == ["mutation/buffer"] and not errors(after)


async def test_a_running_mean_fix_is_preferred_when_the_recorded_shape_fits(session: Session) -> None:
    doc, [d] = await opened(session, "running_mean.py", RUNNING_MEAN, "banned-mutation/tensor-attribute")
    action, after = await fix_and_export(doc, d, "register `mean` as a buffer")
    assert action.is_preferred and "shape [4]" in action.title
    assert [str(x.code) for x in after] == ["mutation/buffer"] and not errors(after)


async def test_dim_fixes_apply_torchs_suggestion_and_say_when_a_dim_becomes_static(session: Session) -> None:
    doc, found = await opened(session, "dims.py", DIMS)
    by_target = {x.data["target"]: x for x in found if x.code == "constraint-violation"}  # type: ignore[index]
    assert set(by_target) == {"gated", "reshaped"}

    action, after = await fix_and_export(doc, by_target["gated"], "suggested fix")
    assert action.is_preferred and "größe = Dim('batch', max=8)" in doc.text
    assert [x.data["target"] for x in after if x.code == "constraint-violation"] == ["reshaped"]  # type: ignore[index]

    [static] = [x for x in after if x.code == "constraint-violation"]
    action, after = await fix_and_export(doc, static, "make `rows` static (= 4)")
    assert not action.is_preferred and "\nrows = 4\n" in doc.text
    assert not errors(after), errors(after)


def rewritten(d: types.Diagnostic, *, data: bool, range: types.Range | None = None) -> types.Diagnostic:
    """``d`` as a client may send it back: its message's newlines turned into spaces
    (ALE's loclist keeps one line), no severity or source, ``data`` kept or dropped,
    its range counted the client's own way."""
    return types.Diagnostic(range=range or d.range, message=d.message.replace("\n", " "), code=d.code, data=d.data if data else None)


async def test_a_fix_is_found_for_a_client_that_rewrites_the_message_and_drops_data(session: Session) -> None:
    # ALE 3.3: a multi-line message comes back on one line, with no data.
    doc, found = await opened(session, "dims_ale.py", DIMS)
    [gated] = [x for x in found if x.code == "constraint-violation" and x.data["target"] == "gated"]  # type: ignore[index]
    assert "\n" in gated.message  # the case: a message a client cannot show on one line
    action, after = await fix_and_export(doc, rewritten(gated, data=False), "suggested fix")
    assert action.is_preferred and "größe = Dim('batch', max=8)" in doc.text
    assert [x.data["target"] for x in after if x.code == "constraint-violation"] == ["reshaped"]  # type: ignore[index]


async def test_a_fix_is_found_by_data_whatever_the_client_did_to_range_and_message(session: Session) -> None:
    # A 3.16 client returns data unchanged; its range may be its own (a whole-line region).
    doc, found = await opened(session, "dims_data.py", DIMS)
    [reshaped] = [x for x in found if x.code == "constraint-violation" and x.data["target"] == "reshaped"]  # type: ignore[index]
    line = reshaped.range.start.line
    whole_line = types.Range(types.Position(line, 0), types.Position(line + 1, 0))
    action, after = await fix_and_export(doc, rewritten(reshaped, data=True, range=whole_line), "make `rows` static (= 4)")
    assert "\nrows = 4\n" in doc.text
    assert [x.data["target"] for x in after if x.code == "constraint-violation"] == ["gated"]  # type: ignore[index]


async def test_a_fix_is_found_for_a_client_that_counts_columns_its_own_way(session: Session) -> None:
    # No data, and the columns of `größe = Dim("batch")` counted in another encoding
    # than the negotiated one (a client that takes UTF-16 units for its byte columns).
    doc, found = await opened(session, "dims_bytes.py", DIMS)
    [gated] = [x for x in found if x.code == "constraint-violation" and x.data["target"] == "gated"]  # type: ignore[index]
    text = doc.text.split("\n")[gated.range.start.line]
    assert text.startswith("größe")
    other = UTF16 if doc.client.encoding == UTF8 else UTF8
    recounted = types.Range(types.Position(gated.range.start.line, units(text[: text.index("Dim")], other)), types.Position(gated.range.end.line, units(text, other)))
    assert recounted != gated.range
    action, _ = await fix_and_export(doc, rewritten(gated, data=False, range=recounted), "suggested fix")
    assert "größe = Dim('batch', max=8)" in doc.text


async def test_an_input_metadata_mutation_fix_uses_the_out_of_place_op(session: Session) -> None:
    doc, found = await opened(session, "metadata.py", METADATA)
    assert [str(x.code) for x in found] == ["banned-mutation/input-metadata"] * 2
    first, second = sorted(found, key=lambda x: x.range.start.line)
    _, after = await fix_and_export(doc, first, "`y = y.unsqueeze(0)`")
    assert [x.range.start.line for x in after] == [second.range.start.line]  # only the other one is left
    _, after = await fix_and_export(doc, after[0], "`x = x.transpose(0, 1)`")
    assert after == []


async def test_a_parameter_mutation_fix_runs_it_under_no_grad(session: Session) -> None:
    doc, [d] = await opened(session, "parameter.py", PARAMETER)
    assert d.code == "banned-mutation/parameter"
    action, after = await fix_and_export(doc, d, "under `torch.no_grad()`")
    assert not action.is_preferred and "        with torch.no_grad():\n            self.w.add_(1)\n" in doc.text
    # What the statement asked for, now exported: a parameter mutation (a warning), no error.
    assert [str(x.code) for x in after] == ["mutation/parameter"] and not errors(after)


TRAINING = """\
import torch
from torch import nn


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(nn.ConvTranspose2d(8, 4, 4, 1, 0, bias=False), nn.BatchNorm2d(4), nn.Tanh())

    def forward(self, z):
        return self.main(z)


model = Generator()
example_args = (torch.randn(2, 8, 1, 1),)
"""


async def test_a_model_in_training_mode_fix_adds_eval(session: Session) -> None:
    doc, found = await opened(session, "generator.py", TRAINING)
    [d] = [x for x in found if x.code == "training-mode"]
    assert d.severity == types.DiagnosticSeverity.Warning and d.range.start.line == TRAINING.splitlines().index("model = Generator()")
    action, after = await fix_and_export(doc, d, "eval mode")
    # Verified: it exports, and batch norm in eval mode computes otherwise, so the fix
    # says so and is never preferred.
    assert not action.is_preferred and "changes the outputs: output 0 differs" in action.title
    assert "model = Generator().eval()\n" in doc.text
    # Eval mode: no warning, and batch norm no longer updates its running statistics.
    assert [str(x.code) for x in after] == []


async def test_a_hugging_face_cache_fix_passes_use_cache_false(session: Session) -> None:
    doc, [d] = await opened(session, "hf.py", HF)
    assert d.code == "unsupported-type" and "DynamicCache" in d.message
    action, after = await fix_and_export(doc, d, "`use_cache=False`")
    # The program returns the logits without the cache the model returned: not preferred.
    assert not action.is_preferred and "changes the outputs: the program returns" in action.title
    assert "n_positions=16, use_cache=False)" in doc.text
    assert after == []


async def test_a_pretrained_hugging_face_model_gets_use_cache_false_at_from_pretrained(session: Session) -> None:
    _, workspace = session
    from transformers import GPT2Config, GPT2LMHeadModel  # only to save a tiny model to load, as a user's folder

    saved = workspace / "tiny-gpt2"
    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=32, n_positions=16)).save_pretrained(saved)
    doc, [d] = await opened(
        session,
        "hf_pretrained.py",
        "import torch\nfrom transformers import GPT2LMHeadModel\n\nimport exportlens\n\n\n@exportlens.target\ndef gpt2():\n"
        f"    model = GPT2LMHeadModel.from_pretrained({str(saved)!r})\n"
        "    return model.eval(), (torch.randint(0, 32, (2, 5)),)\n",
    )
    assert d.code == "unsupported-type" and "DynamicCache" in d.message
    _, after = await fix_and_export(doc, d, "`use_cache=False` to `from_pretrained`")
    assert f"from_pretrained({str(saved)!r}, use_cache=False)" in doc.text
    assert after == []


async def test_no_action_where_no_fix_would_work_nor_for_a_changed_buffer(session: Session) -> None:
    client, _ = session
    # Never assigned in __init__: no initial value to register.
    doc, [d] = await opened(session, "no_init.py", ATTRIBUTE.replace("        self.last = torch.zeros(2, 4)\n", "") + "\n\nmodel = Cache()\nexample_args = (torch.randn(2, 4),)\n", "banned-mutation/tensor-attribute")
    assert await actions_for(doc, d) == []

    # An update of another shape than the buffer ([3, 4] into [4]): export would fail to copy it in.
    doc, [d] = await opened(session, "other_shape.py", RUNNING_MEAN.replace("x.mean(0) * 0.1", "x * 0.1"), "banned-mutation/tensor-attribute")
    assert await actions_for(doc, d) == []

    # A fixable diagnostic, but the buffer moved on: its edit would be for other text.
    doc, found = await opened(session, "stale.py", METADATA)
    assert all([await actions_for(doc, x) for x in found])  # offered while the buffer is the result's text
    refactors = await client.text_document_code_action_async(
        types.CodeActionParams(types.TextDocumentIdentifier(doc.uri), found[0].range, types.CodeActionContext(diagnostics=found, only=[types.CodeActionKind.Refactor]))
    )
    assert not refactors  # the client asked for other kinds only
    # A code edit (a comment-only one is served moved from the cache at once): no
    # export runs for it, the debounce is a minute, so the result is for other text.
    doc.replace("class T(nn.Module):", "UNUSED = 0\n\n\nclass T(nn.Module):")
    assert [await actions_for(doc, x) for x in found] == [[], []]


async def test_a_model_module_gets_its_fix_and_the_declaring_file_none(session: Session) -> None:
    client, workspace = session
    project = workspace / "layout"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "layout"\nversion = "0"\n\n[tool.exportlens]\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "model.py").write_text(ATTRIBUTE)
    (project / "targets.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from pkg.model import Cache

            model = Cache()
            example_args = (torch.randn(2, 4),)
            """
        )
    )
    declaring = Doc(client, project / "targets.py")
    declaring.open()
    [shown] = await client.diagnostics_for(declaring.uri, 1)
    assert shown.code == "banned-mutation/tensor-attribute" and shown.range.start.line == declaring.line_of("model = Cache()")
    assert await actions_for(declaring, shown) == []  # its code, and its fix, are in the module
    declaring.close()

    module = Doc(client, project / "pkg" / "model.py")
    module.open()
    [d] = await client.diagnostics_for(module.uri, 1)
    assert d.code == "banned-mutation/tensor-attribute" and d.range.start.line == module.line_of("self.last = y * 2")
    [action] = await actions_for(module, d)
    before = len(client.publishes(module.uri))
    version = apply(module, action)
    module.save()

    def republished() -> list[types.Diagnostic] | None:
        return next((list(p.diagnostics) for p in client.publishes(module.uri)[before:] if p.version == version), None)

    after = await client.until(republished, "the module's view after the fix")
    assert "tensor-attribute" not in str([x.code for x in after]) and not errors(after)


# Both targets of one shape: the buffer fix fits both.
TWO_TARGETS = (Path(__file__).parents[1] / "fixtures" / "fixes" / "two_targets.py").read_text().replace("torch.randn(3, 8)", "torch.randn(5, 4)")


async def test_one_fix_for_the_same_line_of_two_targets_is_one_action(session: Session) -> None:
    client, _ = session
    doc, found = await opened(session, "two_targets.py", TWO_TARGETS, "banned-mutation/tensor-attribute")
    assert sorted(x.data["target"] for x in found) == ["narrow", "wide"]  # type: ignore[index]
    await client.fixes_verified(doc.uri, 1)
    params = types.CodeActionParams(types.TextDocumentIdentifier(doc.uri), found[0].range, types.CodeActionContext(diagnostics=found, only=[types.CodeActionKind.QuickFix]))
    actions = [a for a in await client.text_document_code_action_async(params) or [] if isinstance(a, types.CodeAction)]
    # One edit, fixing both targets' diagnostics: one entry in the menu, not one per target.
    [action] = actions
    assert action.is_preferred and sorted(x.data["target"] for x in action.diagnostics or []) == ["narrow", "wide"]  # type: ignore[index]
    version = apply(doc, action)
    doc.save()
    after = await client.diagnostics_for(doc.uri, version)
    assert "tensor-attribute" not in str([x.code for x in after]) and not errors(after)


async def test_a_model_module_saved_with_a_bom_and_crlf_gets_its_fix(session: Session) -> None:
    # Windows editors save "UTF-8 with BOM" and CRLF; the editor's buffer holds
    # neither the BOM nor anything but the text, yet the view was read from the disk.
    client, workspace = session
    project = workspace / "bom"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "bom"\nversion = "0"\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "model.py").write_bytes(b"\xef\xbb\xbf" + ATTRIBUTE.replace("\n", "\r\n").encode())
    (project / "targets.py").write_text("import torch\n\nfrom pkg.model import Cache\n\nmodel = Cache()\nexample_args = (torch.randn(2, 4),)\n")
    module = Doc(client, project / "pkg" / "model.py")
    module.text = ATTRIBUTE.replace("\n", "\r\n")
    module.open()
    published = await client.until(lambda: next((p for p in client.publishes(module.uri) if p.diagnostics), None), "the module's view")
    assert published.version == 1  # the view was made from the text the buffer holds
    [d] = [x for x in published.diagnostics if x.code == "banned-mutation/tensor-attribute"]
    [action] = await actions_for(module, d)
    assert "register `last` as a buffer" in action.title


async def test_a_fix_saved_in_a_module_is_not_undone_by_the_open_declaring_files_old_result(session: Session) -> None:
    # The declaring file stays open: its last result was made from the module before
    # the fix, and the module's view after the save must not be made from it.
    client, workspace = session
    project = workspace / "open_declaring"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text('[project]\nname = "open_declaring"\nversion = "0"\n')
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "model.py").write_text(ATTRIBUTE)
    (project / "targets.py").write_text("import torch\n\nfrom pkg.model import Cache\n\nmodel = Cache()\nexample_args = (torch.randn(2, 4),)\n")
    declaring = Doc(client, project / "targets.py")
    declaring.open()
    await client.diagnostics_for(declaring.uri, 1)
    module = Doc(client, project / "pkg" / "model.py")
    module.open()
    [d] = await client.diagnostics_for(module.uri, 1)
    [action] = await actions_for(module, d)
    before = len(client.publishes(module.uri))
    version = apply(module, action)
    module.save()

    def fixed() -> list[types.PublishDiagnosticsParams] | None:
        after = [p for p in client.publishes(module.uri)[before:] if p.version == version]
        return after if any("tensor-attribute" not in str([x.code for x in p.diagnostics]) for p in after) else None

    after = await client.until(fixed, "the module's view after the fix")
    # Every view of the saved text is the fixed module's: none from the declaring file's old result.
    assert all("tensor-attribute" not in str([x.code for x in p.diagnostics]) for p in after), [[x.code for x in p.diagnostics] for p in after]
