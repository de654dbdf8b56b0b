"""A torch-free, read-only model of a serialized program, for the server and CLI.

Why: the language server must show a program's signature, nodes, shapes and the
source line of every node without importing torch (seconds of start-up and hundreds
of MB). :func:`read_program` decodes the msgpack bytes laid out as in
:mod:`exportlens.core.serde.schema` and flattens them into the plain dataclasses below,
reusing :class:`exportlens.core.model.signature.Signature` so the signature text is the
one ``print(ep.graph_signature)`` shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from exportlens.core.model.results import Diagnostic
from exportlens.core.model.signature import ArgSpec, InputSpec, OutputSpec, Signature, TensorMeta
from exportlens.core.serde import codec
from exportlens.core.serde import schema as S
from exportlens.core.serde.codec import SchemaError

__all__ = ["ProgramModel", "NodeModel", "SourceLocation", "read_program", "decode_document", "StringTable", "expr_text"]


@dataclass(frozen=True)
class SourceLocation:
    """The deepest frame of a node's ``stack_trace``: where the user's code made it."""

    file: str
    line: int
    function: str


@dataclass(frozen=True)
class NodeModel:
    name: str
    op: str  # "placeholder", "get_attr", "call_function" or "output"
    target: str  # "torch.ops.aten.add.Tensor"; "" for placeholders and the output
    args: tuple[str, ...]  # one short text per argument: "x", "[a, b]", "1", "dim=-1"
    meta: tuple[TensorMeta | None, ...]  # one per output (None: not a tensor)
    source: SourceLocation | None = None
    nn_module_stack: tuple[str, ...] = ()  # module paths, outermost first
    subgraphs: tuple[str, ...] = ()  # names of nested graphs (torch.cond branches, map bodies)
    # Every frame of the node's ``stack_trace``, outermost first: the forward's line
    # that called a submodule, the submodule's line, down to torch's own file (whose
    # frame ``source`` may be). An editor finds the lines of one file among them.
    frames: tuple[SourceLocation, ...] = ()


@dataclass(frozen=True)
class ProgramModel:
    signature: Signature
    nodes: tuple[NodeModel, ...]
    ranges: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    torch_version: str = ""
    has_weights: bool = False
    diagnostics: tuple[Diagnostic, ...] = ()

    def source_lines(self) -> dict[str, SourceLocation]:
        """Node name -> source location, for the nodes that have one."""
        return {n.name: n.source for n in self.nodes if n.source is not None}


# -- sympy ``srepr`` text -> the short form torch prints ("s0", "2*s0 + 1") ------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*)|(?P<num>-?\d+(?:\.\d+)?)|(?P<str>'[^']*')|(?P<p>[(),=]))")
_INFIX = {"Add": " + ", "Mul": "*", "Pow": "**"}


def expr_text(srepr: str) -> str:
    """``Mul(Integer(2), Symbol('s0', integer=True))`` -> ``2*s0``; raw text when unparsable."""
    tokens = [(m.lastgroup, m.group(m.lastgroup or "p")) for m in _TOKEN.finditer(srepr)]
    pos = 0

    def parse() -> str:
        nonlocal pos
        kind, text = tokens[pos]
        pos += 1
        if kind != "name" or pos >= len(tokens) or tokens[pos][1] != "(":
            return text.strip("'") if kind == "str" else text
        pos += 1  # "("
        args: list[str] = []
        while tokens[pos][1] != ")":
            if tokens[pos][0] == "name" and pos + 1 < len(tokens) and tokens[pos + 1][1] == "=":
                pos += 3  # an assumption: integer=True
            else:
                args.append(parse())
            if tokens[pos][1] == ",":
                pos += 1
        pos += 1  # ")"
        if text in ("Symbol", "Integer", "Float") and args:
            return args[0]
        if text in _INFIX and len(args) >= 2:
            return _INFIX[text].join(f"({a})" if " " in a and text != "Add" else a for a in args)
        return f"{text}({', '.join(args)})"

    try:
        out = parse()
    except (IndexError, TypeError):
        return srepr
    return out if pos == len(tokens) else srepr


class StringTable:
    """A document's string table (``P_STRINGS``): every text is stored once and read by id."""

    def __init__(self, strings: list[str]) -> None:
        self.st = strings

    def s(self, sid: Any) -> str:
        if type(sid) is not int or sid < 0:
            raise SchemaError(f"expected a string id, got {sid!r:.40}")
        return self.st[sid]

    def opt(self, sid: Any) -> str | None:
        return None if sid is None else self.s(sid)


_SHORT = 120


def _short(text: str) -> str:
    """A string as an argument's text shows it. Bounded: one long string referenced by
    thousands of arguments (a few bytes each) would otherwise fill the memory."""
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


class _Reader(StringTable):
    def __init__(self, strings: list[str]) -> None:
        super().__init__(strings)
        self.exprs: dict[int, str] = {}
        self._frames: dict[int, tuple[SourceLocation, ...]] = {}

    def dim(self, d: Any) -> int | str:
        if type(d) is int:
            return d
        sid = d[0]
        text = self.exprs.get(sid)
        if text is None:
            text = self.exprs[sid] = expr_text(self.s(sid))
        return text

    def tensor_metas(self, v: Any) -> tuple[TensorMeta | None, ...]:
        """One TensorMeta per output of a node's value (a tensor, or a list/tuple of them)."""
        if type(v) is not list or not v:
            return (None,)
        if v[0] == S.V_TENSOR:
            return (self.tensor_meta(v),)
        if v[0] in (S.V_LIST, S.V_TUPLE):
            return tuple(self.tensor_meta(x) if type(x) is list and x and x[0] == S.V_TENSOR else None for x in v[1:])
        return (None,)

    def tensor_meta(self, v: list[Any]) -> TensorMeta:
        return TensorMeta(
            dtype=self.s(v[1]),
            shape=tuple(self.dim(d) for d in v[2]),
            device=self.s(v[5]),
            requires_grad=bool(v[6]),
        )

    def arg_text(self, a: Any, names: list[str]) -> str:
        if a is None or type(a) in (bool, int, float):
            return repr(a)
        tag = a[0]
        if tag == S.A_NODE:
            return _short(names[a[1]])
        if tag == S.A_STR:
            return repr(_short(self.s(a[1])))
        if tag in (S.A_LIST, S.A_TUPLE):
            inner = ", ".join(self.arg_text(x, names) for x in a[1:])
            return f"[{inner}]" if tag == S.A_LIST else f"({inner}{',' if len(a) == 2 else ''})"
        if tag == S.A_DTYPE:
            return "torch." + _short(self.s(a[1]))
        if tag in (S.A_DEVICE, S.A_LAYOUT, S.A_MEMORY_FORMAT, S.A_OP):
            return _short(self.s(a[1]))
        if tag == S.A_COMPLEX:
            return repr(complex(a[1], a[2]))
        if tag == S.A_DICT:
            return "{" + ", ".join(f"{_short(self.s(k))!r}: {self.arg_text(x, names)}" for k, x in a[1:]) + "}"
        raise SchemaError(f"unknown argument tag {tag!r}")

    def nodes(self, graph: Any, prefix: str, out: list[NodeModel], metas: dict[str, TensorMeta | None]) -> None:
        records, subgraphs = graph[S.G_NODES], graph[S.G_SUBGRAPHS]
        subs = {self.s(name): sub for name, sub in subgraphs}
        names: list[str] = []
        for rec in records:
            op, name = rec[S.N_OP], self.s(rec[S.N_NAME])
            names.append(name)
            if type(op) is not int or not 0 <= op < len(S.OP_NAMES):
                raise SchemaError(f"unknown node op {op!r}")
            args = [self.arg_text(a, names) for a in rec[S.N_ARGS]]
            args += [f"{self.s(k)}={self.arg_text(v, names)}" for k, v in rec[S.N_KWARGS]]
            meta = self.tensor_metas(rec[S.N_VAL]) if op != S.OP_OUTPUT else ()
            if not prefix and meta:
                metas[name] = meta[0]
            m = rec[S.N_META] or []
            source = None
            if len(m) > S.M_LOCATION and m[S.M_LOCATION] is not None:
                file, line, func = m[S.M_LOCATION][:3]
                source = SourceLocation(self.s(file), int(line), self.s(func))
            stack = tuple(self.s(p) for _, p, _ in m[S.M_MODULE_STACK]) if len(m) > S.M_MODULE_STACK and m[S.M_MODULE_STACK] else ()
            frames = self.frames(m[S.M_STACK]) if len(m) > S.M_STACK and m[S.M_STACK] is not None else ()
            target = self.s(rec[S.N_TARGET]) if rec[S.N_TARGET] is not None and op != S.OP_PLACEHOLDER else ""
            sub_names = (target,) if op == S.OP_GET_ATTR and target in subs else ()
            out.append(NodeModel(prefix + name, S.OP_NAMES[op], target, tuple(args), meta, source, stack, sub_names, frames))
        for name in sorted(subs):
            self.nodes(subs[name], f"{prefix}{name}.", out, metas)

    def frames(self, sid: Any) -> tuple[SourceLocation, ...]:
        """A stack trace's frames; the text is shared by many nodes, so parsed once."""
        found = self._frames.get(sid)
        if found is None:
            found = self._frames[sid] = tuple(SourceLocation(f, int(n), fn) for f, n, fn in _FRAME.findall(self.s(sid)))
        return found

    def arg_spec(self, a: Any, metas: dict[str, TensorMeta | None]) -> ArgSpec:
        tag, name = a[0], self.s(a[1])
        kind = S.SA_NAMES.get(tag)
        if kind is None:
            raise SchemaError(f"unknown signature argument tag {tag!r}")
        if tag == S.SA_TENSOR:
            return ArgSpec("tensor", name, meta=metas.get(name))
        if tag == S.SA_CONSTANT:
            value = a[2]
            return ArgSpec("constant", name, value=value if value is None or type(value) in (bool, int, float) else self.arg_text(value, []))
        if tag == S.SA_CUSTOM_OBJ:
            return ArgSpec("custom_obj", name, class_fqn=self.s(a[2]))
        return ArgSpec(kind, name, value=name if tag in (S.SA_SYMINT, S.SA_SYMFLOAT, S.SA_SYMBOOL) else None)

    def signature(self, sig: Any, metas: dict[str, TensorMeta | None], ranges: dict) -> Signature:
        ins = tuple(
            InputSpec(kind=self.s(k), arg=self.arg_spec(a, metas), target=self.opt(t), persistent=p if type(p) is bool else None)
            for k, a, t, p, *_ in sig[S.S_INPUTS]
        )
        outs = tuple(OutputSpec(kind=self.s(k), arg=self.arg_spec(a, metas), target=self.opt(t)) for k, a, t, *_ in sig[S.S_OUTPUTS])
        return Signature(inputs=ins, outputs=outs, ranges=ranges)


def _diagnostic(rec: Any) -> Diagnostic:
    code, message, line, column, end_line, end_column, target = (list(rec) + [None] * 7)[:7]
    if type(code) is not str or type(message) is not str or type(line) is not int:
        raise SchemaError("malformed diagnostic")
    return Diagnostic(
        code=code,
        message=message,
        line=line,
        column=column if type(column) is int else 1,
        end_line=end_line if type(end_line) is int else None,
        end_column=end_column if type(end_column) is int else None,
        target=target if type(target) is str else None,
    )


def decode_document(data: bytes | bytearray | memoryview) -> dict[int, Any]:
    """Bounded msgpack -> the top-level map, version checked, string table present.

    The first step of every reader of program bytes, this one and the torch side's
    :func:`exportlens.core.serde.decode.from_bytes`.
    """
    doc = codec.unpack(data)
    codec.check_version(doc, S.SCHEMA_VERSION, S.P_VERSION)
    strings = doc.get(S.P_STRINGS)
    if type(strings) is not list or not all(type(x) is str for x in strings):
        raise SchemaError("the string table is missing or malformed")
    return doc


def read_program(data: bytes | bytearray | memoryview) -> ProgramModel:
    """Bytes from ``exportlens.dumps`` -> :class:`ProgramModel`, without torch.

    Raises :class:`exportlens.core.serde.codec.SchemaError` for anything malformed.
    """
    doc = decode_document(data)
    r = _Reader(doc[S.P_STRINGS])
    try:
        ranges = {r.s(k): (lo if type(lo) is int else None, hi if type(hi) is int else None) for k, lo, hi in doc.get(S.P_RANGES, [])}
        nodes: list[NodeModel] = []
        metas: dict[str, TensorMeta | None] = {}
        r.nodes(doc[S.P_GRAPH], "", nodes, metas)
        torch_version = doc.get(S.P_TORCH_VERSION, "")
        return ProgramModel(
            signature=r.signature(doc[S.P_SIGNATURE], metas, dict(sorted(ranges.items()))),
            nodes=tuple(nodes),
            ranges=dict(sorted(ranges.items())),
            torch_version=torch_version if type(torch_version) is str else "",
            has_weights=S.P_WEIGHTS in doc,
            diagnostics=tuple(_diagnostic(d) for d in doc.get(S.P_DIAGNOSTICS) or []),
        )
    except SchemaError:
        raise
    except (AttributeError, KeyError, IndexError, TypeError, ValueError, ArithmeticError, RecursionError) as e:
        raise SchemaError(f"inconsistent program: {type(e).__name__}: {e}") from None
