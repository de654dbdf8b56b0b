"""``constraint-violation``: torch's own "Suggested fixes:" applied to the ``Dim``
declaration the diagnostic points at.

torch ends a constraint violation with the fixes it derived from the guards, one per
line: a new range (``batch = Dim('batch', max=8)``) or a constant (``batch = 4``). The
diagnostic's range is the declaring ``Dim(...)`` call (in ``batch = Dim(...)`` or
inline in ``dynamic_shapes``), so the fix replaces that call:

* a range keeps the dim dynamic: the call becomes torch's, under the user's own spelling
  of ``Dim`` (``torch.export.Dim``, an alias); preferred;
* a constant removes the dynamic dim, so its title says so ("make `batch` static (= 4)")
  and it is never preferred; the call becomes the number (``dynamic_shapes`` takes an
  int for a static size).

Offered only when torch suggests exactly one fix and it names the dim declared at the
range: with several dims to change, changing one would leave the diagnostic. Checked
with torch 2.13: both edits export cleanly.
"""

from __future__ import annotations

import ast
import re

from exportlens.core.fixes import nodes
from exportlens.core.fixes.model import Fix, replace_node, segment
from exportlens.core.model.results import Diagnostic

_SUGGESTION = re.compile(r"^\s*(\w+) = (.+?)\s*$")
_RANGE = re.compile(r"^Dim\((['\"])(\w+)\1((?:, (?:min|max)=-?\d+)*)\)$")
_CONSTANT = re.compile(r"^-?\d+$")


def suggestions(message: str) -> list[tuple[str, str]]:
    """torch's suggested fixes, ``(name, right-hand side)``, from the lines after
    "Suggested fixes:" up to the first line that is not one."""
    at = message.find("Suggested fixes:")
    if at < 0:
        return []
    out: list[tuple[str, str]] = []
    for line in message[at:].split("\n")[1:]:
        m = _SUGGESTION.match(line)
        if m is None or not line.startswith(" "):
            break
        out.append((m.group(1), m.group(2)))
    return out


def _declared(call: ast.AST) -> str | None:
    """The name ``Dim("batch", ...)`` declares, when ``call`` is such a call."""
    if not isinstance(call, ast.Call) or not call.args:
        return None
    func = call.func
    callee = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    first = call.args[0]
    if callee != "Dim" or not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return None
    return first.value


def fixes(source: str, diagnostic: Diagnostic) -> list[Fix]:
    found = suggestions(diagnostic.message)
    if len(found) != 1:
        return []
    [(name, value)] = found
    tree = nodes.parse(source)
    if tree is None:
        return []
    call = next((n for n in ast.walk(tree) if isinstance(n, ast.Call) and nodes.spans(n, diagnostic)), None)
    if call is None or _declared(call) != name:
        return []
    if _CONSTANT.match(value):
        # Never preferred: the program would accept only this size.
        return [Fix(f"make `{name}` static (= {value}): torch's suggested fix removes the dynamic dim", diagnostic, (replace_node(call, value),))]
    m = _RANGE.match(value)
    if m is None:
        return []  # a derived dim or an expression: not a plain range to put here
    callee = segment(source.split("\n"), call.func)  # the user's own spelling of Dim
    new = f"{callee}({m.group(1)}{name}{m.group(1)}{m.group(3)})"
    return [Fix(f"apply torch's suggested fix: `{new}`", diagnostic, (replace_node(call, new),), preferred=True)]
