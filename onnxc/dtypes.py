"""Element types: ONNX enum <-> numpy dtype <-> C type <-> onnxruntime type string, in one table."""
from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes  # onnx depends on it: numpy dtypes for bfloat16 and friends
import numpy as np
from onnx import TensorProto

from .errors import NotImplemented as OrtNotImplemented


@dataclass(frozen=True)
class ElemType:
    onnx: int          # TensorProto.DataType
    name: str          # onnxruntime's spelling inside 'tensor(...)'
    np: np.dtype
    c: str             # C storage type
    is_float: bool = False
    is_signed: bool = True
    compute: str = ""  # C type arithmetic happens in, when it differs from storage (float16 -> float)

    @property
    def cc(self) -> str:
        """C type to compute in; templates load with onnxc_ld_<name>() and store with onnxc_st_<name>()."""
        return self.compute or self.c

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    @property
    def ort(self) -> str:
        return f"tensor({self.name})"


_TABLE = [
    ElemType(TensorProto.FLOAT, "float", np.dtype(np.float32), "float", True),
    ElemType(TensorProto.DOUBLE, "double", np.dtype(np.float64), "double", True),
    ElemType(TensorProto.FLOAT16, "float16", np.dtype(np.float16), "uint16_t", True, compute="float"),
    ElemType(TensorProto.BFLOAT16, "bfloat16", np.dtype(ml_dtypes.bfloat16), "uint16_t", True, compute="float"),
    ElemType(TensorProto.INT8, "int8", np.dtype(np.int8), "int8_t"),
    ElemType(TensorProto.INT16, "int16", np.dtype(np.int16), "int16_t"),
    ElemType(TensorProto.INT32, "int32", np.dtype(np.int32), "int32_t"),
    ElemType(TensorProto.INT64, "int64", np.dtype(np.int64), "int64_t"),
    ElemType(TensorProto.UINT8, "uint8", np.dtype(np.uint8), "uint8_t", is_signed=False),
    ElemType(TensorProto.UINT16, "uint16", np.dtype(np.uint16), "uint16_t", is_signed=False),
    ElemType(TensorProto.UINT32, "uint32", np.dtype(np.uint32), "uint32_t", is_signed=False),
    ElemType(TensorProto.UINT64, "uint64", np.dtype(np.uint64), "uint64_t", is_signed=False),
    ElemType(TensorProto.BOOL, "bool", np.dtype(np.bool_), "uint8_t", is_signed=False),
    # Low-precision types (runtime_c/onnxc_lowp.h): one element per byte, as ml_dtypes holds them
    # in numpy. The sub-byte ones (4- and 2-bit) are packed only inside TensorProto, which
    # numpy_helper unpacks on load and packs on save; in memory the low bits hold the value.
    ElemType(TensorProto.FLOAT8E4M3FN, "float8e4m3fn", np.dtype(ml_dtypes.float8_e4m3fn), "uint8_t", True,
             compute="float"),
    ElemType(TensorProto.FLOAT8E4M3FNUZ, "float8e4m3fnuz", np.dtype(ml_dtypes.float8_e4m3fnuz), "uint8_t",
             True, compute="float"),
    ElemType(TensorProto.FLOAT8E5M2, "float8e5m2", np.dtype(ml_dtypes.float8_e5m2), "uint8_t", True,
             compute="float"),
    ElemType(TensorProto.FLOAT8E5M2FNUZ, "float8e5m2fnuz", np.dtype(ml_dtypes.float8_e5m2fnuz), "uint8_t",
             True, compute="float"),
    ElemType(TensorProto.FLOAT8E8M0, "float8e8m0", np.dtype(ml_dtypes.float8_e8m0fnu), "uint8_t", True,
             is_signed=False, compute="float"),
    ElemType(TensorProto.FLOAT4E2M1, "float4e2m1", np.dtype(ml_dtypes.float4_e2m1fn), "uint8_t", True,
             compute="float"),
    ElemType(TensorProto.INT4, "int4", np.dtype(ml_dtypes.int4), "uint8_t", compute="int8_t"),
    ElemType(TensorProto.UINT4, "uint4", np.dtype(ml_dtypes.uint4), "uint8_t", is_signed=False,
             compute="uint8_t"),
    ElemType(TensorProto.INT2, "int2", np.dtype(ml_dtypes.int2), "uint8_t", compute="int8_t"),
    ElemType(TensorProto.UINT2, "uint2", np.dtype(ml_dtypes.uint2), "uint8_t", is_signed=False,
             compute="uint8_t"),
]

# Strings: C stores pointers to NUL-terminated UTF-8 (``const char *``, 8 bytes). The pointed-to
# bytes are never created by generated code: they are the caller's input strings or string
# literals of the library (see onnxc.cstring.literal). numpy holds them as object arrays of str.
# STRING is kept out of BY_NP/BY_ONNX so code that only knows numeric storage never meets it;
# from_onnx(..., strings=True) opts in (graph inputs/outputs, the session).
STRING = ElemType(TensorProto.STRING, "string", np.dtype(object), "const char *", is_signed=False)

BY_ONNX = {t.onnx: t for t in _TABLE}
BY_NP = {t.np: t for t in _TABLE}
BY_NAME = {t.name: t for t in _TABLE}

FLOAT = BY_ONNX[TensorProto.FLOAT]
INT64 = BY_ONNX[TensorProto.INT64]
BOOL = BY_ONNX[TensorProto.BOOL]

# types whose loads/stores need runtime_c/onnxc_lowp.h
LOWP = frozenset(t for t in _TABLE if t.onnx in (
    TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ, TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ,
    TensorProto.FLOAT8E8M0, TensorProto.FLOAT4E2M1, TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2,
    TensorProto.UINT2))
# value bits of the sub-byte integers
SUBBYTE_BITS = {TensorProto.INT4: 4, TensorProto.UINT4: 4, TensorProto.INT2: 2, TensorProto.UINT2: 2}


def from_onnx(code: int, where: str = "", strings: bool = False) -> ElemType:
    if code == TensorProto.STRING and strings:
        return STRING
    try:
        return BY_ONNX[code]
    except KeyError:
        name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else code
        raise OrtNotImplemented(f"element type {name} is not supported yet{where}") from None


def from_numpy(dt) -> ElemType | None:
    return BY_NP.get(np.dtype(dt))


def from_name(name: str) -> ElemType:
    """Accepts 'float', 'tensor(float)', 'float32', numpy-like names."""
    n = name[7:-1] if name.startswith("tensor(") else name
    if n in BY_NAME:
        return BY_NAME[n]
    return BY_NP[np.dtype(n)]


# ---- containers: sequences and optionals ------------------------------------------------------
@dataclass(frozen=True)
class ContainerType(ElemType):
    """A sequence of tensors, or an optional tensor or sequence. In C one ``onnxc_seq`` header
    (16 bytes: count, items; runtime_c/onnxc_runtime.h): a sequence's items are its tensors, an
    optional tensor is 1 item or count -1 (empty), an optional sequence is the sequence or count -1.
    ``elem`` is the tensor element type (an optional sequence: the ContainerType of the sequence).
    ``elem_rank``: the tensors' rank where known (not part of the type's identity)."""
    kind: str = "sequence"
    elem: ElemType | None = None
    elem_rank: int | None = field(default=None, compare=False)

    @property
    def ort(self) -> str:
        inner = self.elem.ort
        return f"seq({inner})" if self.kind == "sequence" else f"optional({inner})"

    @property
    def tensor(self) -> ElemType:
        """The element type of the tensors inside (through an optional sequence)."""
        return self.elem.tensor if isinstance(self.elem, ContainerType) else self.elem


def container(kind: str, elem: ElemType, elem_rank: int | None = None) -> ContainerType:
    return ContainerType(0, f"{kind}({elem.name})", np.dtype((np.void, 16)), "onnxc_seq",
                         kind=kind, elem=elem, elem_rank=elem_rank)


def from_type_proto(tp, where: str = "") -> ElemType:
    """A TypeProto's element type: a tensor's ElemType, or a ContainerType for sequence/optional."""
    which = tp.WhichOneof("value")
    if which == "tensor_type":
        return from_onnx(tp.tensor_type.elem_type, where, strings=True)
    if which in ("sequence_type", "optional_type"):
        inner_tp = tp.sequence_type.elem_type if which == "sequence_type" else tp.optional_type.elem_type
        inner = from_type_proto(inner_tp, where)
        if isinstance(inner, ContainerType) and (which == "sequence_type" or inner.kind != "sequence"):
            raise OrtNotImplemented(f"type {which} of {inner.ort} is not supported{where}")
        rank = None
        if inner_tp.WhichOneof("value") == "tensor_type" and inner_tp.tensor_type.HasField("shape"):
            rank = len(inner_tp.tensor_type.shape.dim)
        elif isinstance(inner, ContainerType):
            rank = inner.elem_rank
        return container("sequence" if which == "sequence_type" else "optional", inner, rank)
    raise OrtNotImplemented(f"type {which} is not supported{where}")
