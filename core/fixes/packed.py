"""A recurrent layer run on a ``PackedSequence`` (``pack_padded_sequence`` ->
``self.lstm(packed)`` -> ``pad_packed_sequence``), which export cannot trace
(pytorch issue 171978: torch 2.13 fails inside ``nn.LSTM`` with "zeros(): argument
'size' failed to unpack the object ... but got FakeTensor").

The fix runs the layer on the padded batch itself and zeroes the padded steps, as
``pad_packed_sequence`` fills them:

```python
packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
y, _ = self.lstm(packed)
y, _ = pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
```

becomes

```python
y, _ = self.lstm(x)
y = y * (torch.arange(y.shape[1], device=y.device)[None, :] < lengths[:, None]).unsqueeze(-1).to(y.dtype)
```

(time-major, ``batch_first=False``: the mask is ``[:, None] < lengths[None, :]``). A
unidirectional layer reads the steps in order, so each sequence's outputs up to its
length are the packed run's; a bidirectional one reads the padding backwards first,
and its outputs differ: the verification (``core/fixes/verified``) finds that and
the fix is then offered as changing the outputs, never preferred. The same holds of
the final state when the code uses it (the packed run's is at each sequence's
length, the padded run's at the end). Offered for exactly that three-statement shape
in one function: the packed value used once, by the layer call; the padded output
re-bound with ``_`` as the lengths. Checked with torch 2.13: the rewritten tagger
exports and its outputs equal the packed model's.
"""

from __future__ import annotations

import ast

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, TextEdit, replace_node, segment
from exportlens.core.model.results import Diagnostic

_PACK = "pack_padded_sequence"
_PAD = "pad_packed_sequence"


def _callee(call: ast.expr) -> str | None:
    if not isinstance(call, ast.Call):
        return None
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _batch_first(call: ast.Call) -> bool | None:
    value = _keyword(call, "batch_first")
    if value is None:
        return False if len(call.args) < 3 else None
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, bool) else None


def _names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]  # type: ignore[attr-defined]
    return None


def _whole_lines(stmt: ast.stmt, lines: list[str]) -> TextEdit:
    """An edit removing ``stmt``'s lines (a statement of its own on them)."""
    return TextEdit(stmt.lineno, 1, stmt.end_lineno + 1, 1, "")  # type: ignore[operator]


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    tree = nodes.parse(source)
    found = nodes.statement_at(tree, diagnostic) if tree is not None else None
    if tree is None or found is None or not any(isinstance(n, ast.Import) and any(a.name == "torch" and a.asname is None for a in n.names) for n in tree.body):
        return []
    stmt, parents = found
    function = nodes.enclosing_function(parents)
    if function is None or not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call)):
        return []
    body = function.body
    if stmt not in body:
        return []
    layer_call = stmt.value
    if not layer_call.args or not isinstance(layer_call.args[0], ast.Name):
        return []
    packed_name = layer_call.args[0].id
    at = body.index(stmt)
    pack = next((s for s in reversed(body[:at]) if isinstance(s, ast.Assign) and _names(s.targets[0]) == [packed_name]), None)
    out_names = _names(stmt.targets[0])
    if pack is None or not isinstance(pack.value, ast.Call) or _callee(pack.value) != _PACK or len(pack.value.args) < 2 or not out_names:
        return []
    pad = body[at + 1] if at + 1 < len(body) else None
    if not (isinstance(pad, ast.Assign) and len(pad.targets) == 1 and isinstance(pad.value, ast.Call) and _callee(pad.value) == _PAD):
        return []
    padded = _names(pad.targets[0])
    if not (pad.value.args and isinstance(pad.value.args[0], ast.Name) and pad.value.args[0].id == out_names[0]):
        return []
    if padded is None or len(padded) != 2 or padded[1] != "_":
        return []
    uses = [n for n in ast.walk(function) if isinstance(n, ast.Name) and n.id == packed_name and isinstance(n.ctx, ast.Load)]
    first = _batch_first(pack.value)
    if len(uses) != 1 or first is None or _batch_first(pad.value) != first:
        return []
    lines = source.split("\n")
    inputs, lengths = (segment(lines, a) for a in pack.value.args[:2])
    layer = segment(lines, layer_call.func)
    rest = "".join(f", {segment(lines, a)}" for a in layer_call.args[1:])
    out, result = out_names[0], padded[0]
    steps = f"torch.arange({out}.shape[{1 if first else 0}], device={out}.device)"
    mask = f"({steps}[None, :] < {lengths}[:, None])" if first else f"({steps}[:, None] < {lengths}[None, :])"
    edits = (
        _whole_lines(pack, lines),
        replace_node(layer_call, f"{layer}({inputs}{rest})"),
        replace_node(pad, f"{result} = {out} * {mask}.unsqueeze(-1).to({out}.dtype)"),
    )
    title = f"run `{layer}` on the padded `{inputs}` and zero the steps past `{lengths}`, instead of packing (export cannot trace a PackedSequence)"
    return [Fix(title, diagnostic, edits, preferred=True)]
