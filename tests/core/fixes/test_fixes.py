"""Each family of quick fixes on real source text: the edit it makes, and where it
offers none. The diagnostics are the ones a real export reports for these models
(same lines, columns and torch's message); tests/e2e/test_quick_fixes.py exports
each model again after the edit."""

from __future__ import annotations

import textwrap

from exportlens.core.fixes import apply, fixes_for
from exportlens.core.model.results import Diagnostic, FileResult, TargetResult


def _diag(source: str, code: str, statement: str, message: str, target: str | None = None, occurrence: int = 0) -> Diagnostic:
    """The diagnostic at ``statement`` (its text, 1-based byte columns), as the export reports it."""
    lines = source.split("\n")
    found = [i for i, text in enumerate(lines) if statement in text][occurrence]
    start = lines[found].index(statement)
    column = len(lines[found][:start].encode()) + 1
    return Diagnostic(code, message, found + 1, column, found + 1, column + len(statement.encode()), target)


def _fixed(source: str, d: Diagnostic, result: FileResult | None = None) -> list[tuple[str, bool, str]]:
    return [(f.title, f.preferred, apply(source, f.edits)) for f in fixes_for(source, d, result or FileResult("m.py"))]


# ---------------------------------------------------------------- tensor attribute

ATTRIBUTE = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Cache(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 4)
            self.last = torch.zeros(2, 4)

        def forward(self, x):
            y = self.fc(x)
            self.last = y * 2
            return y
    """
)
ATTRIBUTE_MESSAGE = (
    "`self.last` is a tensor attribute assigned during export but not a registered buffer: export keeps its first "
    "value and silently drops this update. Register it in `Cache.__init__` with `self.register_buffer('last', ...)` and update it in place."
)


def test_a_tensor_attribute_is_registered_as_a_buffer_where_init_assigns_it() -> None:
    d = _diag(ATTRIBUTE, "banned-mutation/tensor-attribute", "self.last = y * 2", ATTRIBUTE_MESSAGE)
    [(title, preferred, text)] = _fixed(ATTRIBUTE, d)
    assert text == ATTRIBUTE.replace("self.last = torch.zeros(2, 4)", "self.register_buffer('last', torch.zeros(2, 4), persistent=False)")
    assert "buffer in `Cache.__init__`" in title and "same shape" in title
    assert not preferred  # export copies into the buffer: an update of another shape would not export


def test_no_buffer_fix_without_a_known_initial_value() -> None:
    cases = {
        "never assigned in __init__": ATTRIBUTE.replace("        self.last = torch.zeros(2, 4)\n", ""),
        "None at first": ATTRIBUTE.replace("torch.zeros(2, 4)", "None"),
        "conditional": ATTRIBUTE.replace("        self.last = torch.zeros(2, 4)\n", "        if True:\n            self.last = torch.zeros(2, 4)\n"),
        "before super().__init__()": ATTRIBUTE.replace(
            "        super().__init__()\n        self.fc = nn.Linear(4, 4)\n        self.last = torch.zeros(2, 4)\n",
            "        self.last = torch.zeros(2, 4)\n        super().__init__()\n        self.fc = nn.Linear(4, 4)\n",
        ),
        "a class attribute of that name": ATTRIBUTE.replace("class Cache(nn.Module):\n", "class Cache(nn.Module):\n    last = None\n\n"),
    }
    for why, source in cases.items():
        d = _diag(source, "banned-mutation/tensor-attribute", "self.last = y * 2", ATTRIBUTE_MESSAGE)
        assert _fixed(source, d) == [], why


# ---------------------------------------------------------------- input metadata

METADATA = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class T(nn.Module):
        def forward(self, x, y):
            y.unsqueeze_(0)
            x.transpose_(0, 1)
            return x + 1, y
    """
)
METADATA_MESSAGE = "`transpose_` on input `args[0]`: metadata mutation of a graph input ... use the out-of-place op (`x = x.transpose(0, 1)`)."


def test_an_input_metadata_mutation_becomes_the_out_of_place_op() -> None:
    d = _diag(METADATA, "banned-mutation/input-metadata", "x.transpose_(0, 1)", METADATA_MESSAGE)
    [(title, preferred, text)] = _fixed(METADATA, d)
    assert text == METADATA.replace("x.transpose_(0, 1)", "x = x.transpose(0, 1)")
    assert preferred and "`x = x.transpose(0, 1)`" in title
    d = _diag(METADATA, "banned-mutation/input-metadata", "y.unsqueeze_(0)", METADATA_MESSAGE)
    [(_, _, text)] = _fixed(METADATA, d)
    assert "        y = y.unsqueeze(0)\n" in text


def test_no_out_of_place_fix_where_the_rebinding_would_differ() -> None:
    cases = {
        "an alias sees the mutation": (METADATA.replace("        y.unsqueeze_(0)\n", "        z = x\n"), "x.transpose_(0, 1)"),
        "its value is used": (METADATA.replace("x.transpose_(0, 1)", "z = x.transpose_(0, 1)"), "z = x.transpose_(0, 1)"),
        "in a loop": (METADATA.replace("        x.transpose_(0, 1)\n", "        for _ in range(2):\n            x.transpose_(0, 1)\n"), "x.transpose_(0, 1)"),
        "not an input": (METADATA.replace("x.transpose_(0, 1)", "self.w.transpose_(0, 1)"), "self.w.transpose_(0, 1)"),
    }
    for why, (source, statement) in cases.items():
        d = _diag(source, "banned-mutation/input-metadata", statement, METADATA_MESSAGE)
        assert _fixed(source, d) == [], why


# ---------------------------------------------------------------- constraint violation

SPECIALISED = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim


    class M(nn.Module):
        def forward(self, x):
            return x.reshape(4, -1)


    batch = Dim("batch", max=64)
    model = M()
    example_args = (torch.randn(4, 3),)
    dynamic_shapes = {"x": {0: batch}}
    """
)
CONSTANT_MESSAGE = (
    "the declared dynamic_shapes are violated: Constraints violated (batch)!\n"
    "  - You marked batch as dynamic but your code specialized it to be a constant (4). If you're using mark_dynamic, ...\n"
    "Suggested fixes:\n"
    "  batch = 4\n"
    "torch's suggested fix `batch = 4` would remove the dynamic dim `batch` (the program would accept only size 4). ..."
)
BOUNDED = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim


    class M(nn.Module):
        def forward(self, x):
            if x.shape[0] > 8:
                return x * 2
            return x + 1


    model = M()
    example_args = (torch.randn(4, 3),)
    dynamic_shapes = {"x": {0: Dim("batch")}}
    """
)
RANGE_MESSAGE = (
    "the declared dynamic_shapes are violated: Constraints violated (batch)!\n"
    "  - Not all values of batch = L['x'].size()[0] in the specified range satisfy the generated guard 2 <= L['x'].size()[0] and L['x'].size()[0] <= 8\n"
    "Suggested fixes:\n"
    "  batch = Dim('batch', max=8)"
)


def test_a_suggested_range_replaces_the_dim_declaration() -> None:
    d = _diag(BOUNDED, "constraint-violation", 'Dim("batch")', RANGE_MESSAGE)
    [(title, preferred, text)] = _fixed(BOUNDED, d)
    assert text == BOUNDED.replace('Dim("batch")', "Dim('batch', max=8)")
    assert preferred and "suggested fix" in title
    # The user's own spelling of Dim is kept.
    spelled = BOUNDED.replace('Dim("batch")', 'torch.export.Dim("batch")')
    d = _diag(spelled, "constraint-violation", 'torch.export.Dim("batch")', RANGE_MESSAGE)
    [(_, _, text)] = _fixed(spelled, d)
    assert "{0: torch.export.Dim('batch', max=8)}" in text


def test_a_suggested_constant_says_it_makes_the_dim_static_and_is_not_preferred() -> None:
    d = _diag(SPECIALISED, "constraint-violation", 'Dim("batch", max=64)', CONSTANT_MESSAGE)
    [(title, preferred, text)] = _fixed(SPECIALISED, d)
    assert text == SPECIALISED.replace('batch = Dim("batch", max=64)', "batch = 4")
    assert title.startswith("make `batch` static (= 4)") and not preferred


def test_no_dim_fix_when_torch_suggests_several_or_another_dim() -> None:
    several = RANGE_MESSAGE + "\n  seq = Dim('seq', max=16)"
    d = _diag(BOUNDED, "constraint-violation", 'Dim("batch")', several)
    assert _fixed(BOUNDED, d) == []
    other = BOUNDED.replace('Dim("batch")', 'Dim("rows")')
    d = _diag(other, "constraint-violation", 'Dim("rows")', RANGE_MESSAGE)
    assert _fixed(other, d) == []
    derived = RANGE_MESSAGE.replace("Dim('batch', max=8)", "2*_batch")
    d = _diag(BOUNDED, "constraint-violation", 'Dim("batch")', derived)
    assert _fixed(BOUNDED, d) == []


# ---------------------------------------------------------------- Hugging Face cache

HF = textwrap.dedent(
    """\
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import exportlens


    @exportlens.target
    def gpt2():
        config = GPT2Config(
            n_layer=1,
            n_embd=8,
        )
        return GPT2LMHeadModel(config).eval(), (torch.randint(0, 32, (2, 5)),)
    """
)
CACHE_MESSAGE = "the model returns its key/value cache (`DynamicCache`), which export cannot return: pass `use_cache=False` ...\nFound <class 'transformers.cache_utils.DynamicCache'>"


def _hf_result(source: str, name: str, line_text: str) -> tuple[Diagnostic, FileResult]:
    line = source.split("\n").index(line_text) + 1
    d = Diagnostic("unsupported-type", CACHE_MESSAGE, line, 1, line, len(line_text) + 1, target=name)
    return d, FileResult("m.py", targets=(TargetResult(name, line, "error"),))


def test_use_cache_false_goes_to_the_one_config_of_the_target() -> None:
    d, result = _hf_result(HF, "gpt2", "def gpt2():")
    [(title, preferred, text)] = _fixed(HF, d, result)
    assert "        n_embd=8, use_cache=False,\n    )" in text  # after the last argument, its trailing comma kept
    assert preferred and "`use_cache=False`" in title
    flat = "model = GPT2LMHeadModel(GPT2Config(n_layer=1)).eval()"
    globals_form = f"import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\n{flat}\nexample_args = (torch.randint(0, 32, (2, 5)),)\n"
    d, result = _hf_result(globals_form, "GPT2LMHeadModel", flat)
    [(_, _, text)] = _fixed(globals_form, d, result)
    assert "GPT2Config(n_layer=1, use_cache=False)" in text


def test_use_cache_false_goes_to_from_pretrained_when_no_config_is_made() -> None:
    source = HF.replace("    config = GPT2Config(\n        n_layer=1,\n        n_embd=8,\n    )\n", '    config = "gpt2"\n').replace(
        "GPT2LMHeadModel(config)", "GPT2LMHeadModel.from_pretrained(config)"
    )
    d, result = _hf_result(source, "gpt2", "def gpt2():")
    [(title, preferred, text)] = _fixed(source, d, result)
    assert "GPT2LMHeadModel.from_pretrained(config, use_cache=False).eval()" in text
    assert preferred and "`from_pretrained`" in title


def test_no_use_cache_fix_when_the_place_is_ambiguous() -> None:
    cases = {
        "two configs": HF.replace("    return GPT2LMHeadModel", "    other = GPT2Config()\n    return GPT2LMHeadModel"),
        "use_cache decided elsewhere": HF.replace("    return GPT2LMHeadModel", "    config.use_cache = True\n    return GPT2LMHeadModel"),
        "config from **kwargs": HF.replace("n_embd=8,", "**settings,"),
        "no config made here": HF.replace("GPT2Config(\n        n_layer=1,\n        n_embd=8,\n    )", "make_config()"),
    }
    for why, source in cases.items():
        d, result = _hf_result(source, "gpt2", "def gpt2():")
        assert _fixed(source, d, result) == [], why
    # Another unsupported type is not a cache.
    d, result = _hf_result(HF, "gpt2", "def gpt2():")
    other = Diagnostic("unsupported-type", "Found <class 'mylib.Thing'>", d.line, 1, d.end_line, d.end_column, "gpt2")
    assert _fixed(HF, other, result) == []


def test_no_fix_for_a_buffer_that_does_not_parse() -> None:
    broken = METADATA + "\ndef (:\n"
    d = _diag(broken, "banned-mutation/input-metadata", "x.transpose_(0, 1)", METADATA_MESSAGE)
    assert _fixed(broken, d) == []


# ---------------------------------------------------------------- parameter mutation

PARAMETER = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class P(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(3))

        def forward(self, x):
            self.w.add_(1)
            return x * self.w
    """
)
PARAMETER_MESSAGE = "`add_` on parameter `w`: in-place mutation of a parameter that requires grad is banned in export: ..."


def test_a_parameter_mutation_runs_under_no_grad() -> None:
    d = _diag(PARAMETER, "banned-mutation/parameter", "self.w.add_(1)", PARAMETER_MESSAGE)
    [(title, preferred, text)] = _fixed(PARAMETER, d)
    assert text == PARAMETER.replace("        self.w.add_(1)\n", "        with torch.no_grad():\n            self.w.add_(1)\n")
    assert "`torch.no_grad()`" in title and not preferred
    multi = PARAMETER.replace("self.w.add_(1)", "self.w.add_(\n            1\n        )")
    d = Diagnostic("banned-mutation/parameter", PARAMETER_MESSAGE, d.line, d.column, d.line + 2, 10)
    [(_, _, text)] = _fixed(multi, d)
    assert "        with torch.no_grad():\n            self.w.add_(\n            1\n        )\n" in text


def test_no_no_grad_fix_where_it_would_not_be_the_statement_alone() -> None:
    cases = {
        "two statements on the line": (PARAMETER.replace("self.w.add_(1)", "self.w.add_(1); x = x + 1"), "self.w.add_(1)"),
        "already under no_grad": (PARAMETER.replace("        self.w.add_(1)\n", "        with torch.no_grad():\n            self.w.add_(1)\n"), "self.w.add_(1)"),
        "torch imported under another name": (PARAMETER.replace("import torch\n", "import torch as th\n"), "self.w.add_(1)"),
        "its value is used": (PARAMETER.replace("self.w.add_(1)", "y = self.w.add_(1)"), "y = self.w.add_(1)"),
    }
    for why, (source, statement) in cases.items():
        d = _diag(source, "banned-mutation/parameter", statement, PARAMETER_MESSAGE)
        assert _fixed(source, d) == [], why


# ---------------------------------------------------------------- a tensor attribute updated in place

KV_CACHE = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wk = nn.Linear(8, 8)
            self.cache_k = torch.zeros(2, 16, 8)
            self.steps = torch.zeros(1)

        def forward(self, x, start: int = 0):
            bsz, n, _ = x.shape
            self.cache_k[:bsz, start : start + n] = self.wk(x)
            self.steps += 1
            self.steps.add_(1)
            return self.cache_k[:bsz, : start + n].sum(1)
    """
)
KV_MESSAGE = (
    "`self.layers[0].attention.cache_k` and `self.layers[1].attention.cache_k` are tensor attributes, not registered buffers, that "
    "`forward` updates in place: ... Register it in `Attention.__init__` with `self.register_buffer('cache_k', ..., persistent=False)`: ..."
)


def test_a_tensor_attribute_updated_in_place_is_registered_as_a_buffer() -> None:
    """Issue 22: the error export fails with (Meta's Llama's KV cache) has the
    register-buffer fix, preferred: an in-place update keeps the buffer's shape."""
    d = _diag(KV_CACHE, "banned-mutation/tensor-attribute", "self.cache_k[:bsz, start : start + n] = self.wk(x)", KV_MESSAGE)
    d = Diagnostic(d.code, d.message, d.line, d.column, d.end_line, d.end_column, "llama", level="error")
    [(title, preferred, text)] = _fixed(KV_CACHE, d)
    assert text == KV_CACHE.replace("self.cache_k = torch.zeros(2, 16, 8)", "self.register_buffer('cache_k', torch.zeros(2, 16, 8), persistent=False)")
    assert preferred and "in-place update" in title
    message = KV_MESSAGE.replace("cache_k", "steps")
    for statement in ("self.steps += 1", "self.steps.add_(1)"):
        [(_, preferred, text)] = _fixed(KV_CACHE, _diag(KV_CACHE, "banned-mutation/tensor-attribute", statement, message))
        assert preferred and "self.register_buffer('steps', torch.zeros(1), persistent=False)" in text, statement


# ---------------------------------------------------------------- training mode

TRAINING = textwrap.dedent(
    """\
    import torch
    from torch import nn

    import exportlens


    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bn = nn.BatchNorm1d(4)

        def forward(self, x):
            return self.bn(x)


    model = Net()
    example_args = (torch.randn(2, 4),)


    @exportlens.target
    def made():
        return Net(), (torch.randn(2, 4),)


    @exportlens.target
    def as_dict():
        net = Net()
        return {"model": net if True else None, "example_args": (torch.randn(2, 4),)}
    """
)
TRAINING_MESSAGE = "`Net` is exported in training mode, with `BatchNorm1d` `bn` (m.py:10): ..."


def test_a_model_in_training_mode_gets_eval_where_it_is_made() -> None:
    d = _diag(TRAINING, "training-mode", "model = Net()", TRAINING_MESSAGE)
    [(title, preferred, text)] = _fixed(TRAINING, d)
    assert text == TRAINING.replace("model = Net()\n", "model = Net().eval()\n")
    assert title == "put the model in eval mode: `Net().eval()`" and preferred
    d = _diag(TRAINING, "training-mode", "def made():", TRAINING_MESSAGE)
    [(_, _, text)] = _fixed(TRAINING, d)
    assert "    return Net().eval(), (torch.randn(2, 4),)\n" in text
    # Not an atom: parenthesised first.
    d = _diag(TRAINING, "training-mode", "def as_dict():", TRAINING_MESSAGE)
    [(_, _, text)] = _fixed(TRAINING, d)
    assert '{"model": (net if True else None).eval(), ' in text


def test_no_eval_fix_where_no_expression_of_the_users_makes_the_module() -> None:
    cases = {
        "a decorated class": (TRAINING.replace("class Net(nn.Module):", "@exportlens.target(example_args=(torch.randn(2, 4),))\nclass Net(nn.Module):"), "class Net(nn.Module):"),
        "already in eval mode": (TRAINING.replace("model = Net()", "model = Net().eval()"), "model = Net().eval()"),
        "two returns": (TRAINING.replace("    return Net(), (torch.randn(2, 4),)", "    if True:\n        return Net(), ()\n    return Net(), (torch.randn(2, 4),)"), "def made():"),
    }
    for why, (source, statement) in cases.items():
        d = _diag(source, "training-mode", statement, TRAINING_MESSAGE)
        assert _fixed(source, d) == [], why


# ---------------------------------------------------------------- a chain of in-place updates

RUNNING_AVERAGE = textwrap.dedent(
    """\
    import torch
    from torch import nn

    class Avg(nn.Module):
        def __init__(self):
            super().__init__()
            self.avg = torch.zeros(4)
        def forward(self, x):
            self.avg.mul_(0.9).add_(x.mean(0) * 0.1)
            return x - self.avg
    """
)
RUNNING_MESSAGE = (
    "`self.avg` is a tensor attribute, not a registered buffer, that `forward` updates in place: this line calls `.mul_(...)` on it. "
    "Export keeps such a tensor as a constant and fails on the update (torch says \"Constant avg is mutated in the forward method\" for "
    "the first it meets). Register it in `Avg.__init__` with `self.register_buffer('avg', ..., persistent=False)`: export then records "
    "each update as a buffer mutation."
)


def test_a_chain_of_in_place_updates_registers_its_innermost_receiver() -> None:
    d = _diag(RUNNING_AVERAGE, "banned-mutation/tensor-attribute", "self.avg.mul_(0.9).add_(x.mean(0) * 0.1)", RUNNING_MESSAGE)
    assert (d.line, d.column, d.end_line, d.end_column) == (9, 9, 9, 49)  # as the real export reports it
    [(title, preferred, text)] = _fixed(RUNNING_AVERAGE, d)
    assert text == RUNNING_AVERAGE.replace("self.avg = torch.zeros(4)", "self.register_buffer('avg', torch.zeros(4), persistent=False)")
    assert preferred and "register `avg` as a buffer in `Avg.__init__`" in title
    longer = RUNNING_AVERAGE.replace("self.avg.mul_(0.9).add_(x.mean(0) * 0.1)", "self.avg.mul_(0.9).add_(x.mean(0)).clamp_(0, 1)")
    d = _diag(longer, "banned-mutation/tensor-attribute", "self.avg.mul_(0.9).add_(x.mean(0)).clamp_(0, 1)", RUNNING_MESSAGE)
    [(_, preferred, text)] = _fixed(longer, d)
    assert preferred and "self.register_buffer('avg', torch.zeros(4), persistent=False)" in text


def test_no_buffer_fix_for_a_chain_that_does_not_update_the_attribute() -> None:
    cases = {
        # ``clone()`` makes a new tensor: the chain updates it, not the attribute.
        "out of place inside": "self.avg.clone().mul_(0.9).add_(x.mean(0) * 0.1)",
        "another object's tensor": "x.mul_(0.9).add_(self.avg)",
        "a dunder, not an update": "self.avg.__iadd__(x.mean(0))",
    }
    for why, statement in cases.items():
        source = RUNNING_AVERAGE.replace("self.avg.mul_(0.9).add_(x.mean(0) * 0.1)", statement)
        d = _diag(source, "banned-mutation/tensor-attribute", statement, RUNNING_MESSAGE)
        assert _fixed(source, d) == [], why


# ---------------------------------------------------------------- derived dims

DERIVED = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim

    class Net(nn.Module):
        def forward(self, x):
            return x.view(x.shape[0] // 2, 2, x.shape[1]).sum(1)

    frames = Dim("frames", min=2, max=64)
    model = Net()
    example_args = (torch.randn(8, 3),)
    dynamic_shapes = {"x": {0: frames}}
    """
)
DERIVED_MESSAGE = (
    "the declared dynamic_shapes are violated: Constraints violated (frames)!\n"
    "  - Not all values of frames = L['x'].size()[0] in the specified range frames <= 64 satisfy the generated guard (L['x'].size()[0] // 2) != 1.\n"
    "Suggested fixes:\n"
    "  _frames = Dim('_frames', min=1, max=32)\n"
    "  frames = 2*_frames"
)


def test_a_derived_dim_replaces_the_declaration_with_its_root_and_expression() -> None:
    d = _diag(DERIVED, "constraint-violation", 'Dim("frames", min=2, max=64)', DERIVED_MESSAGE)
    assert (d.line, d.column, d.end_line, d.end_column) == (9, 10, 9, 38)  # as the real export reports it
    [(title, preferred, text)] = _fixed(DERIVED, d)
    assert text == DERIVED.replace('frames = Dim("frames", min=2, max=64)', "_frames = Dim('_frames', min=1, max=32)\nframes = 2*_frames")
    assert preferred and title == "apply torch's suggested fixes: `_frames = Dim('_frames', min=1, max=32); frames = 2*_frames`"
    # The user's own spelling of Dim; a declaration inside a function keeps its indentation.
    spelled = DERIVED.replace("from torch.export import Dim\n", "").replace('frames = Dim("frames"', 'frames = torch.export.Dim("frames"')
    made = spelled.replace("frames = torch", "def made():\n    frames = torch").replace("\nmodel = Net()", "\n    return frames\nmodel = Net()")
    d = _diag(made, "constraint-violation", 'torch.export.Dim("frames", min=2, max=64)', DERIVED_MESSAGE)
    [(_, _, text)] = _fixed(made, d)
    assert "def made():\n    _frames = torch.export.Dim('_frames', min=1, max=32)\n    frames = 2*_frames\n    return frames\n" in text


def test_a_derived_dim_declared_inline_gets_its_root_on_the_line_before() -> None:
    inline = DERIVED.replace('frames = Dim("frames", min=2, max=64)\n', "").replace("{0: frames}", '{0: Dim("frames", min=2, max=64)}')
    d = _diag(inline, "constraint-violation", 'Dim("frames", min=2, max=64)', DERIVED_MESSAGE)
    [(title, preferred, text)] = _fixed(inline, d)
    assert text == inline.replace(
        'dynamic_shapes = {"x": {0: Dim("frames", min=2, max=64)}}', "_frames = Dim('_frames', min=1, max=32)\ndynamic_shapes = {\"x\": {0: 2*_frames}}"
    )
    assert preferred and "`frames` becomes `2*_frames`" in title


TWO_DIMS = textwrap.dedent(
    """\
    import torch
    from torch import nn
    from torch.export import Dim

    class Net(nn.Module):
        def forward(self, x, y):
            return x + y[1:]

    dx = Dim("dx", min=2, max=64)
    dy = Dim("dy", min=2, max=64)
    model = Net()
    example_args = (torch.randn(4, 3), torch.randn(5, 3))
    dynamic_shapes = {"x": {0: dx}, "y": {0: dy}}
    """
)
TWO_DIMS_MESSAGE = (
    "the declared dynamic_shapes are violated: Constraints violated (dx, dy)!\n"
    "  - The values of dy = L['y'].size()[0] and dx = L['x'].size()[0] must always be related to the values of dx = L['x'].size()[0] by dy = dx + 1.\n"
    "Suggested fixes:\n"
    "  dx = Dim('dx', max=63)\n"
    "  dy = dx + 1"
)


def test_a_suggestion_relating_several_dims_changes_each_declaration() -> None:
    d = _diag(TWO_DIMS, "constraint-violation", 'Dim("dx", min=2, max=64)', TWO_DIMS_MESSAGE)
    [(title, preferred, text)] = _fixed(TWO_DIMS, d)
    assert text == TWO_DIMS.replace('dx = Dim("dx", min=2, max=64)', "dx = Dim('dx', max=63)").replace('dy = Dim("dy", min=2, max=64)', "dy = dx + 1")
    assert preferred and "`dx = Dim('dx', max=63); dy = dx + 1`" in title
    # A root among several: on the line before the dim that uses it.
    message = TWO_DIMS_MESSAGE.split("Suggested fixes:\n")[0] + "Suggested fixes:\n  dy = Dim('dy', max=32)\n  _dx = Dim('_dx', min=1, max=32)\n  dx = 2*_dx"
    [(_, preferred, text)] = _fixed(TWO_DIMS, Diagnostic(d.code, message, d.line, d.column, d.end_line, d.end_column))
    assert preferred and "\n_dx = Dim('_dx', min=1, max=32)\ndx = 2*_dx\ndy = Dim('dy', max=32)\n" in text
    # A constant among them: applied, not preferred, and the title says which dim it makes static.
    message = TWO_DIMS_MESSAGE.replace("  dx = Dim('dx', max=63)\n  dy = dx + 1", "  dx = 4\n  dy = 5")
    [(title, preferred, text)] = _fixed(TWO_DIMS, Diagnostic(d.code, message, d.line, d.column, d.end_line, d.end_column))
    assert not preferred and "make `dx`, `dy` static" in title and "\ndx = 4\ndy = 5\n" in text


def test_no_dim_fix_when_a_suggested_line_cannot_be_placed() -> None:
    d = _diag(TWO_DIMS, "constraint-violation", 'Dim("dx", min=2, max=64)', TWO_DIMS_MESSAGE)
    swapped = TWO_DIMS.replace('dx = Dim("dx", min=2, max=64)\ndy = Dim("dy", min=2, max=64)', 'dy = Dim("dy", min=2, max=64)\ndx = Dim("dx", min=2, max=64)')
    inline_dy = TWO_DIMS.replace('dy = Dim("dy", min=2, max=64)\n', "").replace("{0: dy}", '{0: Dim("dy")}')
    cases = {
        "dy = dx + 1 would come before dx": (swapped, d.message),
        "a dim declared inline beside another": (inline_dy, d.message),
        "a dim bound twice": (TWO_DIMS.replace("model = Net()", 'dy = Dim("dy", max=8)\nmodel = Net()'), d.message),
        "a root that nothing uses": (DERIVED, DERIVED_MESSAGE.replace("frames = 2*_frames", "frames = Dim('frames', max=32)")),
        "a root name already taken": (DERIVED.replace("model = Net()", "_frames = 3\nmodel = Net()"), DERIVED_MESSAGE),
        "the message cut short": (TWO_DIMS, TWO_DIMS_MESSAGE[:-3] + "…"),
    }
    for why, (source, message) in cases.items():
        declared = 'Dim("frames", min=2, max=64)' if "frames" in message else 'Dim("dx", min=2, max=64)'
        found = _diag(source, "constraint-violation", declared, message)
        assert _fixed(source, found) == [], why


# ---------------------------------------------------------------- data-dependent checks

BRANCH_ON_VALUE = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Cut(nn.Module):
        def forward(self, x, k):
            n = k.item()
            if n > 3:
                return x[:n]
            return x
    """
)


def _guard_diag(source: str, statement: str, expr: str, result: str) -> Diagnostic:
    d = _diag(source, "data-dependent", statement, f"export cannot decide `{expr}`", "Cut")
    return Diagnostic(d.code, d.message, d.line, d.column, d.end_line, d.end_column, d.target, facts=(("expr", expr), ("result", result), ("name:u0", "n")))


def test_no_check_that_asserts_which_way_a_branch_on_the_value_went() -> None:
    # torch._check(n > 3) before `if n > 3:` would drop the other branch from the program.
    d = _guard_diag(BRANCH_ON_VALUE, "if n > 3:", "u0 > 3", "True")
    assert [t for t, _, _ in _fixed(BRANCH_ON_VALUE, d) if "torch._check" in t] == []


def test_a_check_that_pins_the_value_is_offered_but_not_preferred() -> None:
    source = BRANCH_ON_VALUE.replace("        if n > 3:\n            return x[:n]\n        return x\n", "        return x.view(n, -1)\n")
    d = _guard_diag(source, "return x.view(n, -1)", "Eq(u0, 4)", "True")
    [(title, preferred, text)] = _fixed(source, d)
    assert "torch._check(n == 4)" in text and "accepts this value only" in title and not preferred
