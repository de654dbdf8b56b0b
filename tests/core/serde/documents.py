"""Hand-made schema-2.0 program documents, shared by the schema and fuzz tests."""

from __future__ import annotations

from typing import Any

import msgpack

from exportlens.core.serde import schema as S

SYM = "Symbol('s0', integer=True, positive=True)"


def program_doc(version: list[int] | None = None) -> dict[int, Any]:
    """A small valid program by hand: ``add = x + w`` with a parameter ``w``."""
    st = ["w", "x", "add", "torch.ops.aten.add.Tensor", "float32", "cpu", SYM, 'File "m.py", line 3, in forward\n    return x + self.w', "m.py", "forward", "PARAMETER", "USER_INPUT", "USER_OUTPUT", "output", "ATEN", "s0"]
    tensor = [S.V_TENSOR, 4, [[6, 4], 3], [3, 1], 0, 5, False]
    nodes = [
        [S.OP_PLACEHOLDER, 0, None, [], [], [S.V_TENSOR, 4, [3], [1], 0, 5, True], None],
        [S.OP_PLACEHOLDER, 1, None, [], [], tensor, None],
        [S.OP_CALL_FUNCTION, 2, 3, [[S.A_NODE, 1], [S.A_NODE, 0]], [], tensor, [7, None, None, None, [8, 3, 9]]],
        [S.OP_OUTPUT, 13, None, [[S.A_TUPLE, [S.A_NODE, 2]]], [], None, None],
    ]
    return {
        S.P_VERSION: version or list(S.SCHEMA_VERSION),
        S.P_STRINGS: st,
        S.P_GRAPH: [nodes, []],
        S.P_SIGNATURE: {
            S.S_INPUTS: [[10, [S.SA_TENSOR, 0], 0, None], [11, [S.SA_TENSOR, 1], None, None]],
            S.S_OUTPUTS: [[12, [S.SA_TENSOR, 2], None]],
        },
        S.P_RANGES: [[15, 2, None]],
        S.P_CALL_GRAPH: [],
        S.P_VERIFIERS: [14],
        S.P_TORCH_VERSION: "2.13.0",
        S.P_WEIGHTS: [[0, S.W_PARAMETER, 4, [3], True, b"\0" * 12]],
        S.P_DIAGNOSTICS: [["mutation/buffer", "m", 3, 5, 3, 9, "M"]],
    }


def pack(doc: dict[int, Any]) -> bytes:
    return msgpack.packb(doc, use_bin_type=True)
