"""The wire schema cannot change without its version: a hash of every definition in
``core/serde/schema.py`` (field ids, tags, positional orders; not comments or the
docstring) is recorded per ``SCHEMA_VERSION``, as torch guards its own serde schema
with a hash. A change to a definition fails here until the version moves by the
module's rules (major: a reader would misread; minor: an addition) and the new hash
is recorded below, so cached and shared programs are never read by the wrong rules."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[3] / "core" / "serde" / "schema.py"

# SCHEMA_VERSION -> the hash of schema.py's definitions at that version.
RECORDED = {
    (2, 0): "9150abec4f5acae84eea2f6cc1a6d427982d0045858e098b220a21f7353bb950",
}


def definitions(source: str) -> tuple[tuple[int, int], str]:
    """``(SCHEMA_VERSION, hash of every other module-level definition)``."""
    tree = ast.parse(source)
    version: tuple[int, int] | None = None
    parts: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets, value = [node.target.id], node.value
        elif isinstance(node, ast.Assign):
            targets, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            parts.append(ast.dump(node, include_attributes=False))
            continue
        else:
            continue
        if targets == ["SCHEMA_VERSION"] and value is not None:
            version = tuple(ast.literal_eval(value))  # type: ignore[assignment]
            continue
        parts.append(f"{targets}={ast.dump(value, include_attributes=False) if value is not None else ''}")
    assert version is not None, "schema.py has no SCHEMA_VERSION"
    return version, hashlib.sha256("\n".join(parts).encode()).hexdigest()


def test_the_schema_matches_the_hash_recorded_for_its_version() -> None:
    version, digest = definitions(SCHEMA.read_text())
    assert version in RECORDED, f"SCHEMA_VERSION {version} has no recorded hash: record {digest!r} for it in RECORDED"
    assert RECORDED[version] == digest, (
        f"core/serde/schema.py's definitions changed (hash {digest}) but SCHEMA_VERSION is still {version}: "
        "move the version by the module's rules (major when a reader would misread the bytes, minor for an addition), "
        "then record the new hash here"
    )


def test_a_new_field_id_changes_the_hash_and_a_comment_does_not() -> None:
    source = SCHEMA.read_text()
    _, digest = definitions(source)
    _, with_comment = definitions(source + "\n# a comment changes nothing\n")
    assert with_comment == digest
    _, with_field = definitions(source + "\nP_SOMETHING_NEW = 99\n")
    assert with_field != digest
    version, _ = definitions(source.replace("SCHEMA_VERSION: tuple[int, int] = (2, 0)", "SCHEMA_VERSION: tuple[int, int] = (2, 1)"))
    assert version == (2, 1)
