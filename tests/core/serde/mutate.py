"""Deterministic mutations of valid program bytes, for the decode fuzz (torch-free).

Payload ``i`` of a run is a function of the seed, ``i`` and the base payloads only
(``random.Random`` seeded with a string is stable across processes and Python runs),
so the child process that decodes it and the test that reports a failure agree on
its bytes: ``mutated(bases, seed, i)`` rebuilds any culprit.

Half the mutations work on bytes (bit flips, truncation, insertion, deletion,
splices), half on the decoded msgpack structure (a value replaced by an edge case,
an element dropped, duplicated or swapped, a string of the string table replaced by
another one or by a hostile text: code that would create a marker file if it ever
ran, or a symbolic expression that would never finish).
"""

from __future__ import annotations

import random
from typing import Any

import msgpack

__all__ = ["mutated", "hostile_texts", "HOSTILE_EXPRESSIONS"]

# Expressions that sympy computes for minutes or gigabytes (issue 10, finding 3).
HOSTILE_EXPRESSIONS = (
    "2**64**64",
    "Pow(Integer(2), Integer(1000000000000000000000000000000000000000))",
    "Pow(Integer(10), Integer(99999999))",
    "Rational('1e99999999')",
    "Integer(" + "9" * 4000 + ")",
    "Float('0.1', 100000000)",
    "Pow(Pow(Pow(Symbol('s0', integer=True), Integer(64)), Integer(64)), Integer(64))",
    "Mul(" + ", ".join(f"Add(Symbol('s{i}', integer=True), Integer(1))" for i in range(24)) + ")",
    "Float('1e99999999', precision=53)",
    "CeilToInt(Float('1e400', precision=53))",
)

_EDGE_INTS = (0, 1, -1, 2, 7, 255, 65535, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1)
_EDGE_FLOATS = (0.0, -0.0, 0.5, 1e308, -1e308, float("inf"), float("-inf"), float("nan"), 5e-324)


def hostile_texts(marker: str) -> tuple[str, ...]:
    """Texts that run ``open(marker, 'w')`` if any reader pastes them into code it runs."""
    m = repr(marker)
    return (
        f"x=open({m},'w')",  # a default argument of the generated forward
        f"x=open({m},'w'),y",
        f"dim=open({m},'w') and -1)#",  # a keyword argument of a generated call
        f"a\", open({m}, 'w'), \"b",  # out of getattr(self, "...")
        f"a': open({m}, 'w'), 'b",  # out of {'key': value}
        f"__import__('os').open({m}, 65)",
        f"open({m}, 'w')",
        f"Symbol('s0').__class__.__init__.__globals__['__builtins__']['open']({m}, 'w')",
        f"Function('open')({m}, 'w')",
        f'File "m.py", line 1, in f\n    x\ropen({m}, "w")',
    )


def _byte_mutation(rng: random.Random, data: bytes, other: bytes) -> tuple[bytes, str]:
    b = bytearray(data)
    kind = rng.randrange(6)
    if kind == 0:
        where = [rng.randrange(len(b)) for _ in range(rng.randint(1, 4))]
        for i in where:
            b[i] = rng.randrange(256) if rng.random() < 0.5 else b[i] ^ (1 << rng.randrange(8))
        return bytes(b), f"change bytes at {where}"
    i = rng.randrange(len(b))
    if kind == 1:
        return bytes(b[:i]), f"truncate at {i}"
    if kind == 2:
        ins = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        return bytes(b[:i] + ins + b[i:]), f"insert {ins.hex()} at {i}"
    if kind == 3:
        j = min(len(b), i + rng.randint(1, 16))
        return bytes(b[:i] + b[j:]), f"delete [{i}:{j}]"
    if kind == 4:
        j = min(len(b), i + rng.randint(1, 64))
        k = rng.randrange(len(b))
        return bytes(b[:k] + b[i:j] + b[k:]), f"copy [{i}:{j}] to {k}"
    k = rng.randrange(len(other))
    return bytes(b[:i] + other[k:]), f"splice at {i} with another payload from {k}"


def _containers(tree: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], Any]]) -> None:
    if isinstance(tree, list):
        out.append((path, tree))
        for i, x in enumerate(tree):
            _containers(x, (*path, i), out)
    elif isinstance(tree, dict):
        out.append((path, tree))
        for k, x in tree.items():
            _containers(x, (*path, k), out)


def _edge_value(rng: random.Random, strings: int) -> Any:
    kind = rng.randrange(8)
    if kind == 0:
        n = rng.choice(_EDGE_INTS)
        return -n if n <= 2**63 and rng.random() < 0.3 else n  # msgpack holds -2**63 .. 2**64-1
    if kind == 1:
        return rng.choice((strings - 1, strings, strings + 1, -1))  # string ids at and past the end
    if kind == 2:
        return rng.choice(_EDGE_FLOATS)
    if kind == 3:
        return rng.choice(("", "x", "x" * 5000, "torch.ops.aten.add.Tensor", "float32", "s0"))
    if kind == 4:
        return rng.choice((None, True, False, b"", b"\0" * 16))
    if kind == 5:
        return rng.choice(([], {}, [0], [[0]], {1: 2}, [None] * 8))
    if kind == 6:
        return rng.randint(-1000, 1000)
    return [[[[[[0]]]]]]


def _structure_mutation(rng: random.Random, data: bytes, marker: str) -> tuple[bytes, str]:
    doc = msgpack.unpackb(data, raw=False, strict_map_key=False)
    strings: list[str] = doc[2]
    kind = rng.randrange(10)
    if kind <= 2:  # a string of the table replaced by a hostile or another text
        i = rng.randrange(len(strings))
        if kind == 0:
            new = rng.choice(hostile_texts(marker))
        elif kind == 1:
            new = rng.choice(HOSTILE_EXPRESSIONS)
        else:
            new = rng.choice(strings)
        strings[i] = new
        return msgpack.packb(doc, use_bin_type=True), f"structure {'inject' if kind == 0 else 'string'} strings[{i}] = {new[:60]!r}"
    found: list[tuple[tuple[Any, ...], Any]] = []
    _containers(doc, (), found)
    found = [(p, c) for p, c in found if c and p != (2,)]
    path, container = rng.choice(found)
    keys = list(range(len(container))) if isinstance(container, list) else list(container)
    key = rng.choice(keys)
    if kind <= 6:
        value = _edge_value(rng, len(strings))
        container[key] = value
        what = f"{path}[{key!r}] = {value!r:.60}"
    elif kind == 7 and isinstance(container, list):
        del container[key]
        what = f"del {path}[{key}]"
    elif kind == 8 and isinstance(container, list):
        container.insert(key, container[key])
        what = f"duplicate {path}[{key}]"
    elif isinstance(container, list) and len(container) > 1:
        j = rng.randrange(len(container))
        container[key], container[j] = container[j], container[key]
        what = f"swap {path}[{key}] and [{j}]"
    else:
        del container[key]
        what = f"del {path}[{key!r}]"
    return msgpack.packb(doc, use_bin_type=True), f"structure {what}"


def mutated(bases: list[bytes], seed: int, i: int, marker: str) -> tuple[int, bytes, str]:
    """Payload ``i``: (index of its base, bytes, what was done)."""
    rng = random.Random(f"exportlens-fuzz:{seed}:{i}")
    base = i % len(bases)
    if rng.random() < 0.5:
        data, what = _byte_mutation(rng, bases[base], bases[(base + 1) % len(bases)])
    else:
        data, what = _structure_mutation(rng, bases[base], marker)
    return base, data, what
