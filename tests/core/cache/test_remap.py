"""Moving a cached result's lines, file by file: a local module's lines move by its
own map, the declaring file's by its own, and a file quoted by its bare name is
never guessed when two files of the run share that name and moved differently."""

from __future__ import annotations

from exportlens.core.cache.remap import FileMap, remap
from exportlens.core.model.results import Diagnostic, FileResult, Related, TargetResult
from exportlens.core.model.signature import SourceLine
from exportlens.core.source.tokens import line_map

MODULE = b"import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x.item()\n"
MOVED = b"import torch\n\n# one\n# two\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x.item()\n"


def _map(path: str, old: bytes, new: bytes) -> FileMap:
    lines = line_map(old, new)
    assert lines is not None
    return FileMap(path, old, lines)


def _result(own: str, module: str, quote: str) -> FileResult:
    found = Diagnostic(
        "data-dependent",
        f'{quote}:6: data-dependent\n  File "{module}", line 6, in forward',
        6,
        path=module,
        related=(Related(own, 3, "found exporting target `t`"), Related(module, 4, "the class")),
    )
    target = TargetResult("t", 3, "error", module_class=SourceLine(line=4, end_line=4, path=module))
    return FileResult(own, (found,), (target,), local_imports=(module,))


def test_a_modules_lines_move_by_its_own_map_and_the_declaring_files_stay() -> None:
    own, module = "/p/targets.py", "/p/pkg/net.py"
    moved = remap(_result(own, module, "net.py"), [_map(module, MODULE, MOVED)])
    assert moved is not None
    [d] = moved.diagnostics
    assert (d.line, [r.line for r in d.related]) == (7, [3, 5])
    assert d.message == 'net.py:7: data-dependent\n  File "/p/pkg/net.py", line 7, in forward'
    [t] = moved.targets
    assert t.line == 3 and t.module_class is not None and t.module_class.line == 5


def test_a_bare_name_two_files_share_is_not_guessed() -> None:
    own, module = "/p/net.py", "/p/pkg/net.py"  # the declaring file has the module's name
    assert remap(_result(own, module, "net.py"), [_map(module, MODULE, MOVED)]) is None
    # Quoted by a path that tells them apart, it moves.
    moved = remap(_result(own, module, "pkg/net.py"), [_map(module, MODULE, MOVED)])
    assert moved is not None and moved.diagnostics[0].message.startswith("pkg/net.py:7: ")
