"""``core/fixes/fake_kernel``: a custom operator without a fake kernel gets one after its
definition, its output made like a tensor input's. The message is torch 2.13's, as
exportlens reports it (``export-error`` at the line that calls the operator);
tests/e2e/test_fix_families_export.py exports the edited models again."""

from __future__ import annotations

import os
import textwrap

from exportlens.core.fixes import fake_kernel
from exportlens.core.fixes.model import Fix, apply
from exportlens.core.model.results import Diagnostic, FileResult


def message(op: str, name: str) -> str:
    return (
        f"There was no fake impl registered for <CustomOpDef({op})>. This is necessary for torch.compile/export/fx tracing to work. "
        f"Please use `{name}.register_fake` to add an fake impl."
    )


def _diag(source: str, statement: str, text: str, path: str | None = None) -> Diagnostic:
    lines = source.split("\n")
    found = next(i for i, line in enumerate(lines) if statement in line)
    column = len(lines[found][: lines[found].index(statement)].encode()) + 1
    return Diagnostic("export-error", text, found + 1, column, found + 1, column + len(statement.encode()), "Net", path=path)


def _fixes(source: str, d: Diagnostic, result: FileResult | None = None, files: dict[str, str] | None = None) -> list[Fix]:
    return fake_kernel.fixes(source, d, result or FileResult("/p/cop.py"), (files or {}).get)


SCALE = textwrap.dedent(
    """\
    import torch
    from torch import nn

    @torch.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: torch.Tensor, s: float) -> torch.Tensor:
        return x * s

    class Net(nn.Module):
        def forward(self, x):
            return scale(x, 2.0) + 1

    model = Net()
    example_args = (torch.randn(2, 3),)
    """
)


def test_a_fake_kernel_shaped_like_the_tensor_input_follows_the_operator() -> None:
    d = _diag(SCALE, "return scale(x, 2.0) + 1", message("mylib::scale", "scale"))
    [fix] = _fixes(SCALE, d)
    assert apply(SCALE, fix.edits) == SCALE.replace(
        "    return x * s\n\n",
        "    return x * s\n\n@scale.register_fake\ndef _(x: torch.Tensor, s: float) -> torch.Tensor:\n    return torch.empty_like(x)\n\n",
    )
    assert fix.preferred and all(e.path is None for e in fix.edits)
    assert fix.title == "add a fake kernel for `mylib::scale` whose output is shaped like `x` (`torch.empty_like(x)`)"


MIX = textwrap.dedent(
    """\
    import torch
    from torch import Tensor, nn
    from torch.library import custom_op


    @custom_op("mylib::mix", mutates_args=())
    def mix(q: Tensor, k: Tensor, alpha: float = 0.5) -> tuple[Tensor, Tensor]:
        return q * alpha, k * (1 - alpha)


    class Net(nn.Module):
        def forward(self, q, k):
            a, b = mix(q, k)
            return a + 1, b * 2
    """
)


def test_one_candidate_per_tensor_input_and_one_pairing_them_for_a_tuple() -> None:
    d = _diag(MIX, "a, b = mix(q, k)", message("mylib::mix", "mix"))
    found = _fixes(MIX, d)
    head = "@mix.register_fake\ndef _(q: Tensor, k: Tensor, alpha: float = 0.5) -> tuple[Tensor, Tensor]:\n"
    returns = [
        "torch.empty_like(q), torch.empty_like(q)",
        "torch.empty_like(k), torch.empty_like(k)",
        "torch.empty_like(q), torch.empty_like(k)",
    ]
    assert [apply(MIX, f.edits) for f in found] == [
        MIX.replace("    return q * alpha, k * (1 - alpha)\n", f"    return q * alpha, k * (1 - alpha)\n\n\n{head}    return {r}\n")
        for r in returns
    ]
    assert [f.preferred for f in found] == [True, False, False]
    assert "outputs are each shaped like `q`" in found[0].title
    assert "outputs are shaped like `q`, `k` in order" in found[2].title


def test_a_one_element_tuple_and_library_custom_op() -> None:
    source = SCALE.replace("import torch\n", "import torch\nfrom torch import library\n").replace(
        '@torch.library.custom_op("mylib::scale", mutates_args=())\ndef scale(x: torch.Tensor, s: float) -> torch.Tensor:',
        '@library.custom_op(name="mylib::scale", mutates_args=())\ndef scale(x: torch.Tensor, s: float) -> tuple[torch.Tensor]:',
    )
    d = _diag(source, "return scale(x, 2.0) + 1", message("mylib::scale", "scale"))
    [fix] = _fixes(source, d)
    assert "-> tuple[torch.Tensor]:\n    return torch.empty_like(x),\n" in apply(source, fix.edits)


# ---------------------------------------------------------------- an operator of a local module

OPS = textwrap.dedent(
    """\
    from torch import Tensor
    from torch.library import custom_op


    @custom_op("mylib::shift", mutates_args=())
    def shift(x: Tensor, n: int) -> Tensor:
        return x + n
    """
)
MAIN = "import torch\nfrom torch import nn\n\nfrom ops import shift\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return shift(x, 3) * 2\n"


def test_an_operator_of_a_local_module_gets_its_kernel_and_import_torch_there() -> None:
    ops = os.path.join(os.sep, "p", "ops.py")
    d = _diag(MAIN, "return shift(x, 3) * 2", message("mylib::shift", "shift"))
    [fix] = _fixes(MAIN, d, FileResult(os.path.join(os.sep, "p", "model.py"), local_imports=(ops,)), {ops: OPS})
    assert {e.path for e in fix.edits} == {ops}
    assert apply(OPS, fix.edits) == textwrap.dedent(
        """\
        import torch
        from torch import Tensor
        from torch.library import custom_op


        @custom_op("mylib::shift", mutates_args=())
        def shift(x: Tensor, n: int) -> Tensor:
            return x + n


        @shift.register_fake
        def _(x: Tensor, n: int) -> Tensor:
            return torch.empty_like(x)
        """
    )
    assert fix.preferred and "in `ops.py`" in fix.title


# ---------------------------------------------------------------- no fix


def test_no_fake_kernel_when_the_output_or_the_operator_is_unclear() -> None:
    d = _diag(SCALE, "return scale(x, 2.0) + 1", message("mylib::scale", "scale"))
    cases = {
        "a list of tensors": SCALE.replace("s: float) -> torch.Tensor:", "s: float) -> list[torch.Tensor]:"),
        "returns nothing": SCALE.replace("s: float) -> torch.Tensor:", "s: float) -> None:"),
        "returns a number": SCALE.replace("s: float) -> torch.Tensor:", "s: float) -> float:"),
        "no return annotation": SCALE.replace("s: float) -> torch.Tensor:", "s: float):"),
        "no tensor input": SCALE.replace("def scale(x: torch.Tensor, s: float)", "def scale(x: list[int], s: float)"),
        "another decorator": SCALE.replace("def scale(", "@functools.cache\ndef scale("),
        "another operator": SCALE.replace('"mylib::scale"', '"mylib::other"'),
        "not torch's custom_op": SCALE.replace("@torch.library.custom_op(", "@custom_op("),
        "defined twice": SCALE + "\n\ndef scale(x):\n    return x\n",
        "a fake kernel already": SCALE + "\n\n@scale.register_fake\ndef _(x, s):\n    return x\n",
        "registered by name": SCALE + '\n\n@torch.library.register_fake("mylib::scale")\ndef _(x, s):\n    return x\n',
        "*args": SCALE.replace("s: float)", "*s: float)"),
    }
    for why, source in cases.items():
        assert _fixes(source, d) == [], why
    # an operator torch names another way, and one in no file exportlens read
    d = _diag(SCALE, "return scale(x, 2.0) + 1", "There was no fake impl registered for <OpOverload(op='mylib.scale', overload='default')>.")
    assert _fixes(SCALE, d) == []
    d = _diag(MAIN, "return shift(x, 3) * 2", message("mylib::shift", "shift"))
    assert _fixes(MAIN, d, FileResult("/p/model.py", local_imports=("/p/ops.py",))) == []  # no text for it


def test_the_kernel_is_not_named_underscore_where_the_file_uses_that_name() -> None:
    source = SCALE.replace("model = Net()\n", "_ = str\nmodel = Net()\nprint(_(model))\n")
    d = _diag(source, "return scale(x, 2.0) + 1", message("mylib::scale", "scale"))
    [fix] = _fixes(source, d)
    assert "@scale.register_fake\ndef _fake_scale(x: torch.Tensor, s: float) -> torch.Tensor:\n" in apply(source, fix.edits)
