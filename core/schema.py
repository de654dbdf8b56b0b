"""The wire schema of an exportlens program: pure data, no torch.

Why a separate schema: the runtime model (``torch.export.ExportedProgram``, or the
torch-free :mod:`exportlens.core.program_model`) changes with torch; the bytes on
disk must not. So the wire form is a set of plain dataclasses whose every field
carries a stable small-int id (``Annotated[type, id]``). The codec writes maps keyed
by those ids, never by field name: compact, and a field may be renamed freely.

Tagged unions (:class:`_Union`) hold exactly one of their fields; on the wire a union
is a one-key map ``{tag_id: value}``. Build them with ``Cls.create(tag=value)``.

The graph part (:class:`ExportedProgram` and below) uses torch's own field ids from
``torch/_export/serde/schema.py``: the torch side encodes torch's schema objects and
this module can decode the same bytes without torch (unknown ids are skipped, so
only the fields exportlens reads are declared here). The envelope (:class:`Program`,
:class:`Weights`) is exportlens's own.

Version rules for :data:`SCHEMA_VERSION` ``(major, minor)``:

* major moves when a field is removed, a field id is reused, or a field's meaning
  or type changes: old readers would misread the bytes, so they refuse them;
* minor moves when a field or a union tag is added: old readers skip an unknown
  field id, new readers see the default when it is absent.

The torch graph schema's own version travels along (``ExportedProgram.schema_version``)
and is checked by the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import IntEnum
from typing import Annotated, Any, ClassVar

SCHEMA_VERSION: tuple[int, int] = (1, 0)
# The torch serde schema major this module's graph classes mirror.
TORCH_SCHEMA_MAJOR = 8


class _Union:
    """A tagged union: exactly one field set. ``type`` is the tag, ``value`` its value."""

    _type: str

    @classmethod
    def create(cls, **kwargs: Any) -> Any:
        if len(kwargs) != 1:
            raise ValueError(f"{cls.__name__}.create takes exactly one tag, got {sorted(kwargs)}")
        obj = cls(**{f.name: None for f in fields(cls)} | kwargs)  # type: ignore[call-arg, arg-type]
        obj._type = next(iter(kwargs))
        return obj

    @property
    def type(self) -> str:
        return self._type

    @property
    def value(self) -> Any:
        return getattr(self, self._type)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.type == self.type and other.value == self.value  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._type}={self.value!r})"


def union(cls: type) -> type:
    return dataclass(repr=False, eq=False)(cls)


# -- torch graph schema (field ids as in torch/_export/serde/schema.py) -----------


class ScalarType(IntEnum):
    UNKNOWN = 0
    BYTE = 1
    CHAR = 2
    SHORT = 3
    INT = 4
    LONG = 5
    HALF = 6
    FLOAT = 7
    DOUBLE = 8
    COMPLEXHALF = 9
    COMPLEXFLOAT = 10
    COMPLEXDOUBLE = 11
    BOOL = 12
    BFLOAT16 = 13
    UINT16 = 28
    FLOAT8E4M3FN = 29
    FLOAT8E5M2 = 30
    FLOAT8E4M3FNUZ = 31
    FLOAT8E5M2FNUZ = 32
    FLOAT8E8M0FNU = 33
    UINT32 = 34
    UINT64 = 35


# ScalarType -> torch dtype name, as TensorMeta/Signature spell it ("float32").
DTYPE_NAMES: dict[int, str] = {
    1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16",
    7: "float32", 8: "float64", 9: "complex32", 10: "complex64", 11: "complex128",
    12: "bool", 13: "bfloat16", 28: "uint16", 29: "float8_e4m3fn", 30: "float8_e5m2",
    31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz", 33: "float8_e8m0fnu", 34: "uint32",
    35: "uint64",
}  # fmt: skip


class Layout(IntEnum):
    Unknown = 0
    SparseCoo = 1
    SparseCsr = 2
    SparseCsc = 3
    SparseBsr = 4
    SparseBsc = 5
    _mkldnn = 6
    Strided = 7


class MemoryFormat(IntEnum):
    Unknown = 0
    ContiguousFormat = 1
    ChannelsLast = 2
    ChannelsLast3d = 3
    PreserveFormat = 4


@dataclass
class Device:
    type: Annotated[str, 10]
    index: Annotated[int | None, 20] = None


@union
class SymExprHint(_Union):
    as_int: Annotated[int, 10]
    as_bool: Annotated[bool, 20]
    as_float: Annotated[float, 30]


@dataclass
class SymExpr:
    expr_str: Annotated[str, 10]
    hint: Annotated[SymExprHint | None, 20] = None


@union
class SymInt(_Union):
    as_expr: Annotated[SymExpr, 10]
    as_int: Annotated[int, 20]


@dataclass
class TensorMeta:
    dtype: Annotated[ScalarType, 10]
    sizes: Annotated[list[SymInt], 20]
    requires_grad: Annotated[bool, 30]
    device: Annotated[Device, 40]


@union
class SymIntArgument(_Union):
    as_name: Annotated[str, 10]
    as_int: Annotated[int, 20]


@union
class SymFloatArgument(_Union):
    as_name: Annotated[str, 10]
    as_float: Annotated[float, 20]


@union
class SymBoolArgument(_Union):
    as_name: Annotated[str, 10]
    as_bool: Annotated[bool, 20]


@dataclass
class TensorArgument:
    name: Annotated[str, 10]


@dataclass
class TokenArgument:
    name: Annotated[str, 10]


@union
class OptionalTensorArgument(_Union):
    as_tensor: Annotated[TensorArgument, 20]
    as_none: Annotated[bool, 10]


@dataclass
class GraphArgument:
    name: Annotated[str, 10]
    graph: Annotated[Graph, 20]


@dataclass
class CustomObjArgument:
    name: Annotated[str, 10]
    class_fqn: Annotated[str, 20]


@dataclass
class ComplexValue:
    real: Annotated[float, 10]
    imag: Annotated[float, 20]


@union
class Argument(_Union):
    as_none: Annotated[bool, 10]
    as_tensor: Annotated[TensorArgument, 20]
    as_tensors: Annotated[list[TensorArgument], 30]
    as_int: Annotated[int, 50]
    as_ints: Annotated[list[int], 70]
    as_float: Annotated[float, 80]
    as_floats: Annotated[list[float], 90]
    as_string: Annotated[str, 100]
    as_strings: Annotated[list[str], 101]
    as_sym_int: Annotated[SymIntArgument, 110]
    as_sym_ints: Annotated[list[SymIntArgument], 120]
    as_scalar_type: Annotated[ScalarType, 130]
    as_memory_format: Annotated[MemoryFormat, 140]
    as_layout: Annotated[Layout, 150]
    as_device: Annotated[Device, 160]
    as_bool: Annotated[bool, 170]
    as_bools: Annotated[list[bool], 180]
    as_sym_bool: Annotated[SymBoolArgument, 182]
    as_sym_bools: Annotated[list[SymBoolArgument], 184]
    as_optional_tensors: Annotated[list[OptionalTensorArgument], 190]
    as_graph: Annotated[GraphArgument, 200]
    as_custom_obj: Annotated[CustomObjArgument, 210]
    as_operator: Annotated[str, 220]
    as_sym_float: Annotated[SymFloatArgument, 230]
    as_sym_floats: Annotated[list[SymFloatArgument], 240]
    as_optional_tensor: Annotated[OptionalTensorArgument, 250]
    as_complex: Annotated[ComplexValue, 260]
    as_nested_tensors: Annotated[list[list[TensorArgument]], 270]
    as_int_lists: Annotated[list[list[int]], 280]
    as_string_to_argument: Annotated[dict[str, Argument], 290]
    as_float_lists: Annotated[list[list[float]], 300]


@dataclass
class NamedArgument:
    name: Annotated[str, 10]
    arg: Annotated[Argument, 20]


@dataclass
class Node:
    target: Annotated[str, 10]
    inputs: Annotated[list[NamedArgument], 20]
    outputs: Annotated[list[Argument], 30]
    metadata: Annotated[dict[str, str], 40]
    name: Annotated[str | None, 60] = None


@dataclass
class Graph:
    inputs: Annotated[list[Argument], 10]
    outputs: Annotated[list[Argument], 20]
    nodes: Annotated[list[Node], 30]
    tensor_values: Annotated[dict[str, TensorMeta], 40]
    sym_int_values: Annotated[dict[str, SymInt], 50]


@dataclass
class UserInputSpec:
    arg: Annotated[Argument, 10]


@union
class ConstantValue(_Union):
    as_none: Annotated[bool, 10]
    as_int: Annotated[int, 20]
    as_float: Annotated[float, 30]
    as_string: Annotated[str, 40]
    as_bool: Annotated[bool, 50]


@dataclass
class InputToConstantInputSpec:
    name: Annotated[str, 10]
    value: Annotated[ConstantValue, 20]


@dataclass
class InputToParameterSpec:
    arg: Annotated[TensorArgument, 10]
    parameter_name: Annotated[str, 20]


@dataclass
class InputToBufferSpec:
    arg: Annotated[TensorArgument, 10]
    buffer_name: Annotated[str, 20]
    persistent: Annotated[bool, 30]


@dataclass
class InputToTensorConstantSpec:
    arg: Annotated[TensorArgument, 10]
    tensor_constant_name: Annotated[str, 20]


@dataclass
class InputToCustomObjSpec:
    arg: Annotated[CustomObjArgument, 10]
    custom_obj_name: Annotated[str, 20]


@dataclass
class InputTokenSpec:
    arg: Annotated[TokenArgument, 10]


@union
class InputSpec(_Union):
    user_input: Annotated[UserInputSpec, 10]
    parameter: Annotated[InputToParameterSpec, 20]
    buffer: Annotated[InputToBufferSpec, 30]
    tensor_constant: Annotated[InputToTensorConstantSpec, 40]
    custom_obj: Annotated[InputToCustomObjSpec, 50]
    constant_input: Annotated[InputToConstantInputSpec, 60]
    token: Annotated[InputTokenSpec, 70]


@dataclass
class UserOutputSpec:
    arg: Annotated[Argument, 10]


@dataclass
class LossOutputSpec:
    arg: Annotated[TensorArgument, 10]


@dataclass
class BufferMutationSpec:
    arg: Annotated[TensorArgument, 10]
    buffer_name: Annotated[str, 20]


@dataclass
class ParameterMutationSpec:
    arg: Annotated[TensorArgument, 10]
    parameter_name: Annotated[str, 20]


@dataclass
class GradientToParameterSpec:
    arg: Annotated[TensorArgument, 10]
    parameter_name: Annotated[str, 20]


@dataclass
class GradientToUserInputSpec:
    arg: Annotated[TensorArgument, 10]
    user_input_name: Annotated[str, 20]


@dataclass
class UserInputMutationSpec:
    arg: Annotated[TensorArgument, 10]
    user_input_name: Annotated[str, 20]


@dataclass
class OutputTokenSpec:
    arg: Annotated[TokenArgument, 10]


@union
class OutputSpec(_Union):
    user_output: Annotated[UserOutputSpec, 10]
    loss_output: Annotated[LossOutputSpec, 20]
    buffer_mutation: Annotated[BufferMutationSpec, 30]
    gradient_to_parameter: Annotated[GradientToParameterSpec, 40]
    gradient_to_user_input: Annotated[GradientToUserInputSpec, 50]
    user_input_mutation: Annotated[UserInputMutationSpec, 60]
    token: Annotated[OutputTokenSpec, 70]
    parameter_mutation: Annotated[ParameterMutationSpec, 80]


@dataclass
class GraphSignature:
    input_specs: Annotated[list[InputSpec], 10]
    output_specs: Annotated[list[OutputSpec], 20]


@dataclass
class RangeConstraint:
    min_val: Annotated[int | None, 10]
    max_val: Annotated[int | None, 20]


@dataclass
class GraphModule:
    graph: Annotated[Graph, 10]
    signature: Annotated[GraphSignature, 50]


@dataclass
class SchemaVersion:
    major: Annotated[int, 10]
    minor: Annotated[int, 20]


@dataclass
class ExportedProgram:
    graph_module: Annotated[GraphModule, 10]
    range_constraints: Annotated[dict[str, RangeConstraint], 30]
    schema_version: Annotated[SchemaVersion, 60]
    torch_version: Annotated[str, 80] = "<=2.4"


# -- exportlens envelope -----------------------------------------------------------


@dataclass
class TensorData:
    """One weight as raw little-endian bytes: never pickle."""

    name: Annotated[str, 1]
    dtype: Annotated[str, 2]  # torch dtype name: "float32", "bfloat16"
    shape: Annotated[list[int], 3]
    data: Annotated[bytes, 4]
    requires_grad: Annotated[bool, 5] = False


@dataclass
class Weights:
    parameters: Annotated[list[TensorData], 1] = field(default_factory=list)
    buffers: Annotated[list[TensorData], 2] = field(default_factory=list)
    constants: Annotated[list[TensorData], 3] = field(default_factory=list)


@dataclass
class Program:
    """The top-level document. Field 1 (the version) is read before anything else."""

    VERSION_FIELD: ClassVar[int] = 1

    version: Annotated[list[int], 1]
    program: Annotated[ExportedProgram, 2]
    weights: Annotated[Weights | None, 3] = None
