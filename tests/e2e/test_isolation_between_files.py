"""One file never changes another's result (issue 29), through the real CLI: each
file's result is torch's export of that file alone, whatever ran before it in the
same worker and whatever the cache holds.

- ``wider.py`` changes torch's fake-tensor rules inside its own job (an entry of
  ``fake_impls.op_implementations_checks`` that gives ``mm`` one extra column), as
  model code that registers its own meta function does; ``plain.py`` computes the same
  ``x @ w`` (``[5, 7] @ [7, 3]``). Whatever the order, ``plain.py`` says ``[5, 3]``
  and ``wider.py`` says ``[5, 4]``, as torch says of each alone; and the cache then
  serves each file its own.

A library that patches torch at import, preloaded for one file, is in
``tests/core/isolation/test_preload.py`` (the worker's idle time, which a ``check`` run
barely has, is where it is preloaded).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli

PLAIN = textwrap.dedent(
    """\
    import torch


    class MatMul(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("w", torch.ones(7, 3))

        def forward(self, x):
            return x @ self.w


    model = MatMul()
    example_args = (torch.ones(5, 7),)
    """
)

WIDER = textwrap.dedent(
    """\
    import torch
    from torch._subclasses import fake_impls


    def _is_mm(func):
        return func is torch.ops.aten.mm.default


    def _wider(fake_mode, func, a, b):
        meta = torch.empty(a.shape[0], b.shape[1] + 1, device="meta")
        return fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, meta, a.device)


    fake_impls.op_implementations_checks.insert(0, (_is_mm, _wider))
    """
) + PLAIN.split("\n", 1)[1]

def _outputs(doc: dict[str, Any]) -> dict[str, list[str]]:
    """Per file name: its target's output shapes (``float32[5, 3]``) and the
    operators of its program (the ``call_function`` targets in the graph code)."""
    found: dict[str, list[str]] = {}
    for entry in doc["files"]:
        [target] = entry["targets"]
        assert target["status"] == "ok", entry
        specs = target["signature"]["outputs"]
        found[Path(entry["path"]).name] = [f"{s['dtype']}{s['shape']}".replace(" ", "") for s in specs]
    return found


def _check(tmp_path: Path, *files: str, extra: tuple[str, ...] = (), env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_cli("check", "--format", "json", "--jobs", "1", *extra, *files, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


@pytest.mark.parametrize("order", [("wider.py", "plain.py"), ("plain.py", "wider.py")])
def test_a_file_that_changes_fake_tensor_rules_changes_no_other_files_result(tmp_path: Path, order: tuple[str, str]) -> None:
    (tmp_path / "plain.py").write_text(PLAIN)
    (tmp_path / "wider.py").write_text(WIDER)
    cache = {"EXPORTLENS_CACHE_DIR": str(tmp_path / "cache")}
    together = _outputs(_check(tmp_path, *order, env=cache))
    assert together == {"plain.py": ["float32[5,3]"], "wider.py": ["float32[5,4]"]}
    # Alone, from the cache those runs filled: the same.
    for name in order:
        assert _outputs(_check(tmp_path, name, env=cache)) == {name: together[name]}
        text = run_cli("check", name, cwd=tmp_path, env=cache).stdout
        assert "(1 file from the cache)" in text, text
    # And in one worker, several rounds in both orders, without the cache.
    rounds = _outputs(_check(tmp_path, *order, *reversed(order), extra=("--no-cache",)))
    assert rounds == together
