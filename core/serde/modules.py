"""Which class each submodule of an exported program is, read off the program bytes.

Why: hover on a submodule's ``class`` line lists the parameters and buffers of every
instance of it (``block.attn.q.weight`` and ``extra.attn.q.weight``), so the editor
must know which module paths are instances of which class. torch records that on
every node it traces inside a submodule call (``nn_module_stack``: path and the
class's qualified name, ``"pkg.model.Block"``), and the program keeps it. This reads
only those records, not the whole program (:func:`read_program` also builds every
node's arguments and shapes), and never imports torch.

A submodule whose ``forward`` is never called (only its parameters are read) makes
no node and is not here; callers fall back on what the source says.
"""

from __future__ import annotations

from typing import Any

from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError
from exportlens.core.serde.reader import StringTable, decode_document

__all__ = ["module_types"]


def module_types(data: bytes | bytearray | memoryview) -> dict[str, str]:
    """Module path -> the qualified name of its class (``{"": "pkg.Net", "block":
    "pkg.model.Block", "block.attn": "pkg.model.Attn"}``), for every module a node of
    the program was traced in, nested graphs included.

    Raises :class:`SchemaError` for malformed bytes, like the other readers.
    """
    doc = decode_document(data)
    table = StringTable(doc[S.P_STRINGS])
    out: dict[str, str] = {}
    try:
        _walk(doc[S.P_GRAPH], table, out, depth=0)
    except SchemaError:
        raise
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, RecursionError) as e:
        raise SchemaError(f"inconsistent program: {type(e).__name__}: {e}") from None
    return out


# Nested graphs (cond branches inside map bodies...) are shallow in practice; a
# crafted document nesting thousands deep must not recurse without end.
_MAX_DEPTH = 64


def _walk(graph: Any, table: StringTable, out: dict[str, str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise SchemaError("nested graphs too deep")
    for rec in graph[S.G_NODES]:
        meta = rec[S.N_META]
        if type(meta) is not list or len(meta) <= S.M_MODULE_STACK or not meta[S.M_MODULE_STACK]:
            continue
        for _key, path, cls in meta[S.M_MODULE_STACK]:
            out.setdefault(table.s(path), table.s(cls))
    for _name, sub in graph[S.G_SUBGRAPHS]:
        _walk(sub, table, out, depth + 1)
