"""OrtValue and OrtDevice: a tensor as a (device, address) pair, like onnxruntime's.

An OrtValue is an element type, a shape, a device and the address of its first element, plus
whatever keeps that memory alive (``_owner``). On the CPU the memory is also seen as a numpy
array (``_array``) that shares it: ``ortvalue_from_numpy`` wraps the caller's array without a
copy (only a non-contiguous or byte-swapped array is copied first, as onnxruntime does), and
``numpy()`` returns a view. A device other than the CPU will keep ``_array`` None and move data
explicitly (``numpy()``/``update_inplace`` copy); the API does not change when one lands.
"""
from __future__ import annotations

import ctypes
import enum
import numbers
from typing import Sequence

import numpy as np

from . import dtypes
from .errors import BindingError, InvalidArgument
from .errors import NotImplemented as OrtNotImplemented


class OrtDeviceVendorId(enum.IntEnum):
    NONE = 0x0000
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


class OrtDevice:
    """Where memory lives: onnxruntime's (type, memory type, vendor, id) device description."""
    CPU, GPU, FPGA, NPU = 0, 1, 2, 3
    _TYPES = {"cpu": CPU, "gpu": GPU, "cuda": GPU, "fpga": FPGA, "npu": NPU, "dml": GPU, "cann": NPU,
              "webgpu": GPU}
    _VENDORS = {"cuda": OrtDeviceVendorId.NVIDIA, "dml": OrtDeviceVendorId.MICROSOFT,
                "cann": OrtDeviceVendorId.HUAWEI, "webgpu": OrtDeviceVendorId.NONE}
    __slots__ = ("_type", "_mem", "_vendor", "_id", "_name")

    def __init__(self, device_type: int = CPU, mem_type: int = 0, vendor_id: int = 0, device_id: int = 0,
                 name: str | None = None):
        self._type, self._mem, self._vendor, self._id = int(device_type), int(mem_type), int(vendor_id), \
            int(device_id)
        self._name = name or {self.CPU: "cpu", self.GPU: "gpu", self.FPGA: "fpga", self.NPU: "npu"}.get(
            self._type, "unknown")

    @staticmethod
    def make(ort_device_name: str, device_id: int = 0, vendor_id: int = -1) -> "OrtDevice":
        name = ort_device_name
        if name not in OrtDevice._TYPES:
            raise InvalidArgument(f"Unsupported device type: {name}")
        if vendor_id < 0:
            vendor_id = OrtDevice._VENDORS.get(name, 0)
        return OrtDevice(OrtDevice._TYPES[name], 0, int(vendor_id), int(device_id), name)

    def device_id(self) -> int:
        return self._id

    def device_type(self) -> int:
        return self._type

    def device_vendor_id(self) -> int:
        return self._vendor

    def device_mem_type(self) -> int:
        return self._mem

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_cpu(self) -> bool:
        return self._type == self.CPU

    def __eq__(self, other):
        return isinstance(other, OrtDevice) and (self._type, self._mem, self._id) == (
            other._type, other._mem, other._id)

    def __hash__(self):
        return hash((self._type, self._mem, self._id))

    def __repr__(self):
        return f"OrtDevice({self._name!r}, device_id={self._id})"


CPU_DEVICE = OrtDevice(OrtDevice.CPU, 0, 0, 0, "cpu")


def device_for(device_type, device_id: int = 0, vendor_id: int = -1) -> OrtDevice:
    """An OrtDevice this build can hold memory on (only the CPU so far)."""
    if isinstance(device_type, OrtDevice):
        dev = device_type
    else:
        if device_type == "cpu" and not device_id:
            return CPU_DEVICE
        dev = OrtDevice.make(device_type, device_id, vendor_id)
    if not dev.is_cpu:
        raise OrtNotImplemented(f"device {dev.name!r} is not available in this build of onnxc (CPU only so "
                                "far); use device_type='cpu'")
    return dev


def elem_type(element_type) -> dtypes.ElemType:
    """numpy type/dtype, onnx TensorProto enum int, or a name ('float32', 'tensor(float)')."""
    if isinstance(element_type, dtypes.ElemType):
        return element_type
    if isinstance(element_type, numbers.Integral) and not isinstance(element_type, bool):
        return dtypes.from_onnx(int(element_type))
    if isinstance(element_type, str):
        try:
            return dtypes.from_name(element_type)
        except (KeyError, TypeError):
            raise BindingError(f"unknown element type {element_type!r}") from None
    try:
        dt = np.dtype(element_type)
    except TypeError:
        raise BindingError(f"unknown element type {element_type!r}") from None
    et = dtypes.from_numpy(dt.newbyteorder("="))
    if et is None:
        raise OrtNotImplemented(f"numpy type {dt} can't be converted to an onnx element type onnxc supports")
    return et


def _shape(shape) -> tuple:
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise InvalidArgument(f"shape must be a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise InvalidArgument(f"Tensor shape.Size() must be >= 0 (shape {list(out)})")
    return out


def _numel(shape: tuple) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


class OrtValue:
    """A dense tensor on a device. Build one with the ``ortvalue_from_*`` class methods."""
    __slots__ = ("_etype", "_shape", "_device", "_ptr", "_array", "_owner", "_session")

    def __init__(self, etype: dtypes.ElemType, shape: tuple, device: OrtDevice, ptr: int, array=None,
                 owner=None, session=None):
        self._etype, self._shape, self._device = etype, shape, device
        self._ptr, self._array, self._owner, self._session = ptr, array, owner, session

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def _wrap(cls, arr: np.ndarray, etype: dtypes.ElemType | None = None, owner=None) -> "OrtValue":
        """A CPU value over a C-contiguous, aligned, native-order numpy array (no checks, no copy)."""
        if etype is None:
            etype = dtypes.BY_NP[arr.dtype]
        return cls(etype, arr.shape, CPU_DEVICE, None, arr, arr if owner is None else owner)

    @classmethod
    def _from_address(cls, ptr: int, etype: dtypes.ElemType, shape, device: OrtDevice,
                      owner=None) -> "OrtValue":
        """A value over caller-owned memory at ``ptr`` (no copy; the caller keeps it alive)."""
        shape = _shape(shape)
        if isinstance(ptr, bool) or not isinstance(ptr, numbers.Integral):
            raise BindingError(f"buffer_ptr must be an int address, got {type(ptr).__name__}")
        ptr = int(ptr)
        if ptr == 0 and _numel(shape):
            raise InvalidArgument("buffer_ptr is NULL for a non-empty tensor")
        return cls(etype, shape, device, ptr, None, owner)

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, /, device_type="cpu", device_id=0, vendor_id=-1) -> "OrtValue":
        """Wrap a numpy array. On the CPU the value shares the array's memory and keeps it alive
        (a non-contiguous array is copied first, as onnxruntime does)."""
        device = device_for(device_type, device_id, vendor_id)
        if not isinstance(numpy_obj, np.ndarray) or numpy_obj.dtype.kind in "OUSV":
            raise BindingError("Creation of OrtValues is currently only supported from non-string numpy "
                               "arrays")
        et = elem_type(numpy_obj.dtype)
        arr = numpy_obj
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if not (arr.flags.c_contiguous and arr.flags.aligned):
            arr = np.ascontiguousarray(arr)
        return cls._wrap(arr, et, owner=numpy_obj if arr is numpy_obj else arr)

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, /, onnx_element_type: int) -> "OrtValue":
        """Reinterpret ``data`` (no copy) as the onnx element type of the same item size."""
        et = elem_type(int(onnx_element_type))
        if not isinstance(data, np.ndarray):
            raise BindingError("Creation of OrtValues is currently only supported from non-string numpy "
                               "arrays")
        if data.dtype.itemsize != et.itemsize:
            raise InvalidArgument(f"Items size in the incoming array: {data.dtype.itemsize} specified by "
                                  f"onnxtype: {et.itemsize}")
        arr = np.ascontiguousarray(data)
        return cls._wrap(arr.view(et.np), et, owner=data if arr is data else arr)

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape: Sequence[int], element_type, device_type: str = "cpu",
                                     device_id: int = 0, vendor_id: int = -1, memory_info=None) -> "OrtValue":
        """A new, uninitialised tensor owned by the value."""
        device = device_for(device_type, device_id, vendor_id)
        et = elem_type(element_type)
        arr = np.empty(_shape(shape), et.np)
        return cls._wrap(arr, et)

    @classmethod
    def ort_value_from_sparse_tensor(cls, sparse_tensor) -> "OrtValue":
        raise OrtNotImplemented("sparse tensors are not supported by onnxc")

    @classmethod
    def from_dlpack(cls, data, /) -> "OrtValue":
        """Share the memory of any object that speaks DLPack (CPU memory only so far)."""
        if isinstance(data, OrtValue):
            return data
        src = data if hasattr(data, "__dlpack__") else _Capsule(data)
        try:
            arr = np.from_dlpack(src)
        except (TypeError, BufferError, RuntimeError) as e:
            raise BindingError(f"from_dlpack: {e}") from e
        return cls.ortvalue_from_numpy(arr)

    # ---- what it holds ------------------------------------------------------------------------
    def data_ptr(self) -> int:
        if self._ptr is None:     # array-backed: the address is looked up once, when first asked
            self._ptr = self._array.__array_interface__["data"][0]
        return self._ptr

    def device_name(self) -> str:
        return self._device.name

    def device(self) -> OrtDevice:
        return self._device

    def shape(self) -> list:
        return list(self._shape)

    def data_type(self) -> str:
        return self._etype.ort

    def element_type(self) -> int:
        return self._etype.onnx

    def tensor_size_in_bytes(self) -> int:
        return _numel(self._shape) * self._etype.itemsize

    def has_value(self) -> bool:
        return True

    def is_tensor(self) -> bool:
        return True

    def is_sparse_tensor(self) -> bool:
        return False

    def is_tensor_sequence(self) -> bool:
        return False

    def as_sparse_tensor(self):
        raise OrtNotImplemented("This OrtValue does not contain SparseTensor. Check data_type() value.")

    def _get_c_value(self) -> "OrtValue":
        return self

    # ---- data ---------------------------------------------------------------------------------
    def _host_array(self) -> np.ndarray:
        """The CPU memory as a numpy array (shares it)."""
        a = self._array
        if a is None:
            if not self._device.is_cpu:
                raise OrtNotImplemented(f"reading memory on device {self._device.name!r}")
            nbytes = self.tensor_size_in_bytes()
            if nbytes == 0:
                a = np.empty(self._shape, self._etype.np)
            else:
                buf = (ctypes.c_char * nbytes).from_address(self._ptr)
                a = np.frombuffer(buf, self._etype.np).reshape(self._shape)
            self._array = a
        return a

    def numpy(self) -> np.ndarray:
        """The tensor as a numpy array; on the CPU it shares the value's memory (no copy)."""
        return self._host_array().view()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        arr = self.numpy()
        if copy is not None:
            return np.array(arr, dtype=dtype, copy=copy)
        return arr if dtype is None else np.asarray(arr, dtype=dtype)

    def __dlpack__(self, *, stream=None, **kw):
        return self._host_array().__dlpack__(**({"stream": stream} if stream is not None else {}), **kw)

    def __dlpack_device__(self) -> tuple:
        if self._device.is_cpu:
            return (1, 0)          # kDLCPU
        return (2, self._device.device_id())   # kDLCUDA

    def update_inplace(self, data) -> None:
        """Copy ``data`` (numpy array or OrtValue, same element count) into this value's memory;
        the address does not change. Values are converted like numpy's same_kind casting."""
        if isinstance(data, OrtValue):
            data = data._host_array()
        elif not isinstance(data, np.ndarray):
            raise TypeError("data must be a numpy.ndarray or an OrtValue.")
        dst = self._host_array()
        if data.size != dst.size:
            raise BindingError("The input size of numpy arrays does not match the size of the OrtValue.")
        try:
            np.copyto(dst.reshape(-1), np.ascontiguousarray(data).reshape(-1), casting="same_kind")
        except TypeError as e:
            raise BindingError(f"update_inplace: {e}") from None

    def __repr__(self):
        return (f"OrtValue(shape={list(self._shape)}, type={self._etype.ort!r}, "
                f"device={self._device.name!r})")


class _Capsule:
    """Lets numpy consume a bare DLPack capsule (legacy form of from_dlpack)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None, **kw):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)
