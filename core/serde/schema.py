"""The wire schema of an exportlens program (msgpack): pure data, no torch.

Why a separate schema: the runtime model (``torch.export.ExportedProgram``, or the
torch-free :mod:`exportlens.core.serde.reader`) changes with torch; the bytes on
disk must not. This module is the single description of the bytes; the torch side
(:mod:`exportlens.core.serde.encode`, :mod:`exportlens.core.serde.decode`) and the
torch-free reader both follow it.

Shape of the document
---------------------
The top level is a map keyed by small field ids (``P_*`` below); records that
occur once per program are maps too, so a field can be added without breaking
readers. Records that occur once per *node* are positional arrays (``N_*``,
``V_*`` index orders), because a graph has thousands of them and field ids would
double its size. Every text (names, op targets, stack traces, dtype names,
expressions) is stored once in the string table ``P_STRINGS`` and referenced by its
index: a graph repeats the same few hundred strings many times.

Values inside node arguments are tagged unions as in torch's schema: msgpack
``nil``/bool/int/float stand for themselves, and every other value is an array
whose first element is its tag (``A_*``), e.g. ``[A_NODE, 3]`` is "the output of
node 3", ``[A_LIST, 1, [A_NODE, 0]]`` the list ``[1, <node 0>]``. A raw msgpack
string never appears in an argument, so there is no ambiguity.

Canonical: the encoder walks the graph in its (deterministic) node order, assigns
string ids in first-use order, sorts every map-like collection by key, and drops
what differs between two runs of the same code (fx's per-process code-generation
counter in stack traces, ``from_node`` provenance with object ids). Two exports of
the same code give byte-identical documents, so a content hash says "the program
changed".

Version rules for :data:`SCHEMA_VERSION` ``(major, minor)``:

* major moves when a field is removed, a field id or tag is reused, a positional
  element is removed or reordered, or a field's meaning or type changes: old readers
  would misread the bytes, so they refuse them;
* minor moves when a field id, a tag, or a trailing positional element is added:
  old readers skip unknown field ids and ignore trailing elements they do not know,
  new readers see the default when they are absent.

1.x (torch's graph schema by field id) was replaced by 2.0 (own string-table
graph encoding, ~10x faster both ways, half the bytes).
"""

from __future__ import annotations

SCHEMA_VERSION: tuple[int, int] = (2, 0)

# -- top level (map) -------------------------------------------------------------------
P_VERSION = 1  # [major, minor]; read before anything else
P_STRINGS = 2  # [str, ...]: the string table
P_GRAPH = 3  # Graph record (below)
P_SIGNATURE = 4  # {S_INPUTS: [InputSpec], S_OUTPUTS: [OutputSpec]}
P_RANGES = 5  # [[symbol sid, min | nil, max | nil], ...]; nil = unbounded
P_CALL_GRAPH = 6  # [ModuleCallEntry, ...]
P_WEIGHTS = 7  # [TensorData, ...] when weights are included
P_DIAGNOSTICS = 8  # [Diagnostic, ...] the export's diagnostics, when given
P_VERIFIERS = 9  # [dialect sid, ...] ("ATEN", "TRAINING")
P_TORCH_VERSION = 10  # str: torch that produced the program
P_CUSTOM_OBJS = 11  # [[name sid, class fqn sid], ...]: constants stored by name only

# -- signature ------------------------------------------------------------------------
S_INPUTS = 1
S_OUTPUTS = 2
# InputSpec: [kind sid, Arg, target sid | nil, persistent | nil]
# OutputSpec: [kind sid, Arg, target sid | nil]
# Kinds are torch's enum names (``USER_INPUT``, ``BUFFER_MUTATION``...) as strings,
# so a kind a reader does not know survives decoding and can be reported.

# Arg (a graph argument of the signature or of the module call graph):
SA_TENSOR = 0  # [SA_TENSOR, name sid]
SA_SYMINT = 1  # [SA_SYMINT, name sid]
SA_CONSTANT = 2  # [SA_CONSTANT, name sid, value (argument encoding)]
SA_CUSTOM_OBJ = 3  # [SA_CUSTOM_OBJ, name sid, class fqn sid]
SA_TOKEN = 4  # [SA_TOKEN, name sid]
SA_SYMFLOAT = 5  # [SA_SYMFLOAT, name sid]
SA_SYMBOOL = 6  # [SA_SYMBOOL, name sid]
SA_NAMES = {
    SA_TENSOR: "tensor",
    SA_SYMINT: "symint",
    SA_CONSTANT: "constant",
    SA_CUSTOM_OBJ: "custom_obj",
    SA_TOKEN: "token",
    SA_SYMFLOAT: "symfloat",
    SA_SYMBOOL: "symbool",
}

# -- graph ------------------------------------------------------------------------------
# Graph: [nodes, subgraphs]; subgraphs: [[attribute name sid, Graph], ...] sorted by
# name (the bodies of higher-order ops: ``cond`` branches, ``map`` bodies).
G_NODES = 0
G_SUBGRAPHS = 1

# Node: [op, name sid, target sid | nil, args, kwargs, val, meta]
N_OP, N_NAME, N_TARGET, N_ARGS, N_KWARGS, N_VAL, N_META = range(7)
OP_PLACEHOLDER = 0
OP_GET_ATTR = 1
OP_CALL_FUNCTION = 2
OP_OUTPUT = 3
OP_NAMES = ("placeholder", "get_attr", "call_function", "output")
# args: [argument, ...]; kwargs: [[key sid, argument], ...] in call order.

# Node meta: [stack trace sid | nil, nn_module_stack, source_fn_stack, torch_fn,
#             location]
#   nn_module_stack: [[key sid, path sid, type sid], ...] outermost first, or nil
#   source_fn_stack: [[name sid, target sid], ...] or nil
#   torch_fn: [name sid, qualified name sid] or nil
#   location: [file sid, line, function sid] of the deepest user frame, or nil
M_STACK, M_MODULE_STACK, M_SOURCE_FN, M_TORCH_FN, M_LOCATION = range(5)

# -- argument values: [tag, ...] -----------------------------------------------------------
A_NODE = 0  # [A_NODE, node index in this graph]
A_STR = 1  # [A_STR, sid]
A_LIST = 2  # [A_LIST, item, ...]
A_TUPLE = 3  # [A_TUPLE, item, ...]
A_DTYPE = 4  # [A_DTYPE, dtype name sid] ("float32")
A_DEVICE = 5  # [A_DEVICE, device sid] ("cpu", "cuda:0")
A_LAYOUT = 6  # [A_LAYOUT, layout name sid] ("strided")
A_MEMORY_FORMAT = 7  # [A_MEMORY_FORMAT, name sid] ("contiguous_format")
A_OP = 8  # [A_OP, op target sid]: an operator passed as an argument
A_COMPLEX = 9  # [A_COMPLEX, real, imag]
A_DICT = 10  # [A_DICT, [key sid, item], ...]

# -- node values (meta["val"]): nil/bool/int/float, or [tag, ...] ----------------------------
V_TENSOR = 0  # [V_TENSOR, dtype sid, sizes, strides, storage offset, device sid, requires_grad]
V_SYMINT = 1  # [V_SYMINT, expr sid, hint | nil]
V_SYMFLOAT = 2  # [V_SYMFLOAT, expr sid, hint | nil]
V_SYMBOOL = 3  # [V_SYMBOOL, expr sid, hint | nil]
V_LIST = 4  # [V_LIST, value, ...]
V_TUPLE = 5  # [V_TUPLE, value, ...]
V_CUSTOM_OBJ = 6  # [V_CUSTOM_OBJ, name sid, class fqn sid]
V_STR = 7  # [V_STR, sid]
# Sizes, strides and the offset are ints, or [expr sid, hint | nil] when symbolic.
# Expressions are ``sympy.srepr`` text (symbols keep their assumptions).

# -- module call graph ---------------------------------------------------------------------
# ModuleCallEntry: [fqn sid, signature | nil]
# signature: [inputs [Arg], outputs [Arg], in_spec sid, out_spec sid, forward arg names [sid] | nil]
# Specs are torch's ``treespec_dumps`` JSON text.

# -- weights: TensorData ---------------------------------------------------------------------
# [name sid, role, dtype sid, shape [int], requires_grad, raw little-endian bytes]
W_PARAMETER = 0
W_BUFFER = 1
W_CONSTANT = 2
# A sparse tensor's record has bytes b"" and a seventh field
# [layout sid, coalesced, part, ...], each part [dtype sid, shape, bytes]:
# COO: indices, values; CSR: crow_indices, col_indices, values.
SPARSE_COO = "sparse_coo"
SPARSE_CSR = "sparse_csr"

# -- diagnostics: [code, message, line, column, end line | nil, end column | nil, target | nil] --

# torch dtype names the readers accept, with their item size in bytes.
DTYPE_SIZES: dict[str, int] = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint16": 2, "uint32": 4, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4,
    "float64": 8, "complex32": 4, "complex64": 8, "complex128": 16,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
}  # fmt: skip
