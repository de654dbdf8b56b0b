"""A notebook as jupyterlab-lsp sends it (``core/project/virtual_documents.py``).

The texts below are what JupyterLab 4.6.6 with jupyterlab-lsp 5.3.0 sent a language
server in ``textDocument/didOpen`` for ``tests/notebooks.py``'s notebook and for a
notebook of every IPython form the extension rewrites (recorded through a server
that logged its input). ``tests/editors/test_jupyterlab.py`` runs the real thing.
"""

from __future__ import annotations

import pytest

from exportlens.core.project.notebooks import module_of, read_cells
from exportlens.core.project.virtual_documents import blocks, notebook_path, to_ipython, workspace_root
from exportlens.core.project.virtual_documents import module_text as virtual_module
from tests.notebooks import MODEL_CELLS, notebook_json

# tests.notebooks.MODEL_CELLS, as the extension sends it.
MODEL_VIRTUAL = (
    '\n\n\nget_ipython().run_line_magic("matplotlib", " inline")\nimport torch\nfrom torch import nn\nget_ipython().getoutput("nvidia-smi")\n\n\n'
    "def helper(x):\n    if x.sum() > 0:\n        return x + 1\n    return x - 1\n\n\n\n\n\n\n"
    "class Net(nn.Module):\n    def forward(self, x):\n        return helper(x)\n\n\n\n"
    "model = Net()\nexample_args = (torch.randn(3),)\n\n\n"
    "import pathlib\npathlib.Path(__file__).with_name('TRAINED').write_text('ran')\nfor epoch in range(10**9):\n    pass\n"
)
# Cells: "?torch\ntorch??\n!echo "hi"\n%env A="b"\nx = %pwd", "%%time\nx = 1\ny = 2",
# "%%capture out\nprint(1)", '%%bash -e\necho """x""" \d', two markdown cells,
# "class A:\n    pass\n\n\nclass B:\n    pass\n", a raw cell, "if True:\n    %time z = 1\n    !ls".
FORMS_VIRTUAL = (
    "get_ipython().run_line_magic('pinfo', 'torch')\nget_ipython().run_line_magic('pinfo2',  'torch')\n"
    'get_ipython().getoutput("echo "hi"")\nget_ipython().run_line_magic("env", " A=\\"b\\"")\nx = get_ipython().run_line_magic("pwd", "")\n\n\n'
    '# START_CELL_MAGIC("time", "")\nx = 1\ny = 2\n# END_CELL_MAGIC\n\n\n'
    '# START_CELL_MAGIC("capture", " out")\nprint(1)\n# END_CELL_MAGIC\n\n\n'
    'get_ipython().run_cell_magic("bash", " -e", """echo \\"\\"\\"x\\"\\"\\" \\d""")\n\n\n\n\n\n\n\n\n'
    "class A:\n    pass\n\n\nclass B:\n    pass\n\n\n\n\n\n\n"
    'if True:\n    get_ipython().run_line_magic("time", " z = 1")\n    get_ipython().getoutput("ls")\n'
)


def test_the_virtual_document_runs_as_the_notebook_on_disk_does_line_for_line() -> None:
    text = virtual_module(MODEL_VIRTUAL)
    lines, virtual = text.split("\n"), MODEL_VIRTUAL.split("\n")
    assert len(lines) == len(virtual)  # the extension maps each line back to its cell
    on_disk = module_of(read_cells(notebook_json(MODEL_CELLS))).text.rstrip("\n").split("\n")
    assert [line for line in lines if line] == on_disk  # the same module, magics neutralised
    for line, was in zip(lines, virtual, strict=True):
        assert line in ("", was) or "get_ipython()" in was  # nothing moves
    assert lines[virtual.index("    if x.sum() > 0:")] == "    if x.sum() > 0:"
    assert "TRAINED" not in text  # the training cell, after the declarations, never runs
    compile(text, "nb.ipynb", "exec")


def test_every_rewritten_form_is_neutralised_and_only_python_cell_magics_run() -> None:
    """As a notebook on disk runs (``core/project/notebooks.py``): ``%%time`` and
    ``%%capture`` run their Python body, as ruff reads them; ``%%bash`` does not run."""
    text = virtual_module(FORMS_VIRTUAL + "model = A()\nexample_args = ()\n")
    lines = text.split("\n")
    virtual = FORMS_VIRTUAL.split("\n")
    assert len(lines) == len(virtual) + 2
    assert lines[:5] == ["pass  # ?torch", "pass  # torch??", 'pass  # !echo "hi"', 'pass  # %env A="b"', "x = None  # %pwd"]
    time_at, capture_at = virtual.index('# START_CELL_MAGIC("time", "")'), virtual.index('# START_CELL_MAGIC("capture", " out")')
    assert lines[time_at : time_at + 3] == ["pass  # %%time", "x = 1", "y = 2"]
    assert lines[capture_at : capture_at + 2] == ["pass  # %%capture out", "print(1)"]
    [bash] = [i for i, line in enumerate(virtual) if "run_cell_magic" in line]
    assert lines[bash] == "" and "bash" not in text
    assert "    pass  # %time z = 1" in lines and "    pass  # !ls" in lines
    assert "class A:" in lines and "class B:" in lines
    assert "get_ipython" not in text
    compile(text, "nb.ipynb", "exec")


def test_a_document_that_declares_nothing_runs_nothing() -> None:
    assert virtual_module(FORMS_VIRTUAL).strip() == ""


@pytest.mark.parametrize(
    ("line", "ipython"),
    [
        ('get_ipython().run_line_magic("matplotlib", " inline")', "%matplotlib inline"),
        ('get_ipython().run_line_magic("pwd", "")', "%pwd"),
        ('get_ipython().run_line_magic("env", " A=\\"b\\" C=\\\\d")', '%env A="b" C=\\d'),
        ('    get_ipython().run_line_magic("time", " z = 1")', "    %time z = 1"),
        ('files = get_ipython().getoutput("ls -l")', "files = !ls -l"),
        ('get_ipython().getoutput("echo "hi"")', '!echo "hi"'),
        ("get_ipython().run_line_magic('pinfo', 'torch.nn')", "?torch.nn"),
        ("get_ipython().run_line_magic('pinfo2',  'torch')", "torch??"),
        ('get_ipython().run_cell_magic("bash", " -e", """echo""")', "%%bash -e"),
        ('# START_CELL_MAGIC("capture", " out")', "%%capture out"),
        ('print("get_ipython().getoutput(\\"ls\\")")', 'print("get_ipython().getoutput(\\"ls\\")")'),
        ("x = y % 2", "x = y % 2"),
    ],
)
def test_the_extensions_rewrites_are_undone(line: str, ipython: str) -> None:
    assert to_ipython(line) == ipython


def test_cells_are_the_blocks_between_two_blank_lines() -> None:
    found = blocks("\n\na\n\nb\n\n\n\nc\n   \n\nd".split("\n"))
    assert found == [(2, ["a", "", "b"]), (8, ["c"]), (11, ["d"])]


@pytest.mark.parametrize(
    ("path", "notebook"),
    [
        ("/w/.virtual_documents/nb.ipynb", "/w/nb.ipynb"),
        ("/w/.virtual_documents/sub/inner.ipynb", "/w/sub/inner.ipynb"),
        ("/a/.virtual_documents/b/.virtual_documents/nb.ipynb", "/a/.virtual_documents/b/nb.ipynb"),
        ("/w/nb.ipynb", None),
        ("/w/.virtual_documents/m.py", None),
        ("/w/.virtual_documents.ipynb", None),
    ],
)
def test_a_virtual_document_stands_for_the_notebook_beside_its_folder(path: str, notebook: str | None) -> None:
    assert notebook_path(path) == notebook


def test_the_workspace_is_the_folder_above_the_virtual_documents() -> None:
    assert workspace_root("/w/.virtual_documents") == "/w"
    assert workspace_root("/w/.virtual_documents/") == "/w"
    assert workspace_root("/w/project") == "/w/project"
