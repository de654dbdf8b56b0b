"""``core/fixes/pytrees``: a user class export cannot flatten is registered as a pytree
after its definition, in the file that defines it. The messages are torch 2.13's, as
exportlens reports them; tests/e2e/test_fix_families_export.py exports the edited
models again."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable

from exportlens.core.fixes import pytrees
from exportlens.core.fixes.model import Fix, apply
from exportlens.core.model.results import Diagnostic, FileResult

ADVICE = (
    "\nRegister the type with `torch.utils._pytree.register_pytree_node` (or `torch.export.register_dataclass`), "
    "or return/accept plain tensors (for transformers models, pass `use_cache=False`)."
)


def input_message(qualified: str) -> str:
    return (
        f"Unsupported input type <class '{qualified}'>. Export only supports pytree containers of basic types (Tensor, int, float, ...) as input. "
        "To register a custom dataclass, use torch.export.register_dataclass. To register a custom container type, use "
        "torch.utils._pytree.register_pytree_node. To register a constant input, use torch.utils._pytree.register_constant" + ADVICE
    )


def output_message(qualified: str) -> str:
    return (
        f"Found <class '{qualified}'> in output, which is not a known type. If this type holds tensors, you need to register a pytree for it. "
        "See https://github.com/pytorch/functorch/issues/475 for a brief explanation why. If you don't need to register a pytree, please leave "
        "a comment explaining your use case and we'll make this more ergonomic to deal with" + ADVICE
    )


def _diag(source: str, statement: str, message: str) -> Diagnostic:
    lines = source.split("\n")
    found = next(i for i, text in enumerate(lines) if statement in text)
    column = len(lines[found][: lines[found].index(statement)].encode()) + 1
    return Diagnostic("unsupported-type", message, found + 1, column, found + 1, column + len(statement.encode()), "Net")


def _fixes(source: str, d: Diagnostic, result: FileResult, files: dict[str, str] | None = None) -> list[Fix]:
    read: Callable[[str], str | None] = (files or {}).get
    return pytrees.fixes(source, d, result, read)


DATACLASS = textwrap.dedent(
    """\
    from dataclasses import dataclass
    import torch
    from torch import nn

    @dataclass
    class Batch:
        tokens: torch.Tensor
        mask: torch.Tensor

    class Net(nn.Module):
        def forward(self, batch: Batch):
            return batch.tokens * batch.mask

    model = Net()
    example_args = (Batch(torch.randn(2, 3), torch.ones(2, 3)),)
    """
)


def test_a_dataclass_input_is_registered_after_its_class() -> None:
    d = _diag(DATACLASS, "class Net(nn.Module):", input_message("dc.Batch"))
    [fix] = _fixes(DATACLASS, d, FileResult("/p/dc.py"))
    assert apply(DATACLASS, fix.edits) == DATACLASS.replace(
        "    mask: torch.Tensor\n\n",
        '    mask: torch.Tensor\n\ntorch.export.register_dataclass(Batch, serialized_type_name="dc.Batch")\n\n',
    )
    assert fix.preferred and all(e.path is None for e in fix.edits)
    assert fix.title == "register `Batch` as a pytree (`torch.export.register_dataclass`), so export can take it apart as an input"


def test_the_dataclass_decorator_may_be_spelled_with_its_module_and_arguments() -> None:
    source = DATACLASS.replace("from dataclasses import dataclass", "import dataclasses").replace("@dataclass", "@dataclasses.dataclass(frozen=True)")
    d = _diag(source, "class Net(nn.Module):", input_message("dc.Batch"))
    [fix] = _fixes(source, d, FileResult("/p/dc.py"))
    assert 'mask: torch.Tensor\n\ntorch.export.register_dataclass(Batch, serialized_type_name="dc.Batch")\n\nclass Net' in apply(source, fix.edits)


OUTPUT = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Out:
        def __init__(self, logits, hidden):
            self.logits = logits
            self.hidden = hidden


    class Net(nn.Module):
        def forward(self, x):
            return Out(x * 2, x + 1)


    model = Net()
    example_args = (torch.randn(2, 3),)
    """
)


def test_a_plain_output_class_is_registered_by_its_init_fields() -> None:
    d = _diag(OUTPUT, "return Out(x * 2, x + 1)", output_message("outcls.Out"))
    [fix] = _fixes(OUTPUT, d, FileResult("/p/outcls.py"))
    # two blank lines around the class, as the file has them
    assert apply(OUTPUT, fix.edits) == OUTPUT.replace(
        "        self.hidden = hidden\n",
        "        self.hidden = hidden\n\n\n"
        'torch.utils._pytree.register_dataclass(Out, field_names=["logits", "hidden"], serialized_type_name="outcls.Out")\n',
    )
    assert fix.preferred
    assert "`torch.utils._pytree.register_dataclass` with its fields `logits`, `hidden`" in fix.title and "as an output" in fix.title


def test_crlf_lines_stay_crlf() -> None:
    source = OUTPUT.replace("\n", "\r\n")
    d = _diag(source, "return Out(x * 2, x + 1)", output_message("outcls.Out"))
    [fix] = _fixes(source, d, FileResult("/p/outcls.py"))
    expected = OUTPUT.replace(
        "        self.hidden = hidden\n",
        "        self.hidden = hidden\n\n\n"
        'torch.utils._pytree.register_dataclass(Out, field_names=["logits", "hidden"], serialized_type_name="outcls.Out")\n',
    )
    assert apply(source, fix.edits) == expected.replace("\n", "\r\n")


# ---------------------------------------------------------------- a class in a local module

BATCHES = textwrap.dedent(
    '''\
    """Batches."""
    from dataclasses import dataclass

    from torch import Tensor


    @dataclass(frozen=True)
    class Batch:
        tokens: Tensor
        mask: Tensor
    '''
)
MAIN = textwrap.dedent(
    """\
    import torch
    from torch import nn

    from batches import Batch


    class Net(nn.Module):
        def forward(self, batch: Batch):
            return batch.tokens * batch.mask


    model = Net()
    example_args = (Batch(torch.randn(2, 3), torch.ones(2, 3)),)
    """
)


def test_a_dataclass_of_a_local_module_is_registered_there_with_import_torch() -> None:
    module = os.path.join(os.sep, "p", "batches.py")
    result = FileResult(os.path.join(os.sep, "p", "model.py"), local_imports=(module,))
    d = _diag(MAIN, "class Net(nn.Module):", input_message("batches.Batch"))
    [fix] = _fixes(MAIN, d, result, {module: BATCHES})
    assert {e.path for e in fix.edits} == {module}
    assert apply(BATCHES, fix.edits) == textwrap.dedent(
        '''\
        """Batches."""
        import torch
        from dataclasses import dataclass

        from torch import Tensor


        @dataclass(frozen=True)
        class Batch:
            tokens: Tensor
            mask: Tensor


        torch.export.register_dataclass(Batch, serialized_type_name="batches.Batch")
        '''
    )
    assert "in `batches.py`" in fix.title


PACKAGE_OUTPUTS = textwrap.dedent(
    """\
    from __future__ import annotations

    import torch


    class Out:
        def __init__(self, logits: torch.Tensor, *, hidden: torch.Tensor | None = None) -> None:
            \"\"\"What the model returns.\"\"\"
            self.logits: torch.Tensor = logits
            self.hidden = hidden

        def best(self) -> torch.Tensor:
            return self.logits.argmax(-1)
    """
)
PACKAGE_MAIN = "import torch\nfrom torch import nn\n\nfrom pkg.outputs import Out\n\n\nclass Net(nn.Module):\n    def forward(self, x):\n        return Out(x * 2, hidden=x + 1)\n"


def test_a_plain_class_of_a_package_module_keyword_only_and_annotated() -> None:
    module = os.path.join(os.sep, "p", "pkg", "outputs.py")
    init = os.path.join(os.sep, "p", "pkg", "__init__.py")
    result = FileResult(os.path.join(os.sep, "p", "pkg", "main.py"), local_imports=(init, module))
    d = _diag(PACKAGE_MAIN, "return Out(x * 2, hidden=x + 1)", output_message("pkg.outputs.Out"))
    [fix] = _fixes(PACKAGE_MAIN, d, result, {module: PACKAGE_OUTPUTS, init: ""})
    assert [e.path for e in fix.edits] == [module]  # torch is imported there already
    assert apply(PACKAGE_OUTPUTS, fix.edits) == PACKAGE_OUTPUTS + (
        '\n\ntorch.utils._pytree.register_dataclass(Out, field_names=["logits", "hidden"], serialized_type_name="pkg.outputs.Out")\n'
    )


def test_a_class_of_the_declaring_file_from_a_diagnostic_in_a_local_module() -> None:
    declaring = os.path.join(os.sep, "p", "outcls.py")
    local = os.path.join(os.sep, "p", "heads.py")
    source = "def head(x):\n    from outcls import Out\n    return Out(x, x)\n"
    d = Diagnostic("unsupported-type", output_message("outcls.Out"), 3, 5, 3, 20, "Net", path=local)
    [fix] = _fixes(source, d, FileResult(declaring, local_imports=(local,)), {declaring: OUTPUT})
    assert {e.path for e in fix.edits} == {declaring}
    assert "serialized_type_name=\"outcls.Out\")\n\n\nclass Net" in apply(OUTPUT, fix.edits)


# ---------------------------------------------------------------- no fix


def test_no_fix_for_a_class_whose_shape_is_not_clear() -> None:
    d = _diag(OUTPUT, "return Out(x * 2, x + 1)", output_message("outcls.Out"))
    plain = {
        "an attribute computed": OUTPUT.replace("self.hidden = hidden", "self.hidden = hidden * 2"),
        "another attribute name": OUTPUT.replace("self.hidden = hidden", "self.state = hidden"),
        "a parameter not kept": OUTPUT.replace("        self.hidden = hidden\n", ""),
        "another statement": OUTPUT.replace("        self.hidden = hidden\n", "        self.hidden = hidden\n        print(hidden)\n"),
        "*args": OUTPUT.replace("def __init__(self, logits, hidden):", "def __init__(self, logits, hidden, *rest):"),
        "positional-only": OUTPUT.replace("def __init__(self, logits, hidden):", "def __init__(self, logits, hidden, /):"),
        "a base class": OUTPUT.replace("class Out:", "class Out(dict):"),
        "a decorator": OUTPUT.replace("class Out:", "@final\nclass Out:"),
        "a property of a field's name": OUTPUT.replace(
            "        self.hidden = hidden\n", "        self.hidden = hidden\n\n    @property\n    def logits(self):\n        return 1\n"
        ),
        "no __init__": OUTPUT.replace("    def __init__(self, logits, hidden):\n        self.logits = logits\n        self.hidden = hidden\n", "    pass\n"),
        "defined twice": OUTPUT + "\n\nclass Out:\n    pass\n",
        "defined in a function": OUTPUT.replace("class Out:", "def make():\n  class Out:").replace("\n    def __init__", "\n      def __init__").replace("\n        self.", "\n          self."),
        "registered already": OUTPUT + '\ntorch.utils._pytree.register_pytree_node(Out, lambda o: ([o.logits], None), lambda v, _: Out(*v))\n',
    }
    for why, source in plain.items():
        assert _fixes(source, d, FileResult("/p/outcls.py")) == [], why
    d = _diag(DATACLASS, "class Net(nn.Module):", input_message("dc.Batch"))
    dataclasses = {
        "init=False": DATACLASS.replace("@dataclass", "@dataclass(init=False)"),
        "another decorator too": DATACLASS.replace("@dataclass", "@functools.total_ordering\n@dataclass"),
        "not dataclasses' dataclass": DATACLASS.replace("from dataclasses import dataclass", "from pydantic.dataclasses import dataclass"),
    }
    for why, source in dataclasses.items():
        assert _fixes(source, d, FileResult("/p/dc.py")) == [], why


def test_no_fix_for_a_class_in_no_user_file() -> None:
    d = _diag(OUTPUT, "return Out(x * 2, x + 1)", output_message("transformers.modeling_outputs.Out"))
    assert _fixes(OUTPUT, d, FileResult("/p/outcls.py")) == []  # a library's class
    d = _diag(OUTPUT, "return Out(x * 2, x + 1)", output_message("outcls.make.<locals>.Out"))
    assert _fixes(OUTPUT, d, FileResult("/p/outcls.py")) == []  # a class made in a function
    # the local module's text is not available
    module = os.path.join(os.sep, "p", "batches.py")
    d = _diag(MAIN, "class Net(nn.Module):", input_message("batches.Batch"))
    assert _fixes(MAIN, d, FileResult("/p/model.py", local_imports=(module,))) == []
    # a file of that name under a folder exportlens does not import from (not at or above the declaring file's)
    nested = os.path.join(os.sep, "p", "sub", "batches.py")
    assert _fixes(MAIN, d, FileResult("/p/model.py", local_imports=(nested,)), {nested: BATCHES}) == []
    # two files could be that module
    other = os.path.join(os.sep, "batches.py")
    assert _fixes(MAIN, d, FileResult("/p/model.py", local_imports=(module, other)), {module: BATCHES, other: BATCHES}) == []


def test_no_fix_for_the_hugging_face_cache() -> None:
    message = "the model returns its key/value cache (`DynamicCache`), which export cannot return: pass `use_cache=False` ...\n" + output_message(
        "transformers.cache_utils.DynamicCache"
    )
    d = _diag(OUTPUT, "model = Net()", message)
    assert _fixes(OUTPUT, d, FileResult("/p/outcls.py")) == []
