"""IOBinding: inputs and outputs bound to memory ahead of session.run_with_iobinding().

Every binding is an OrtValue, i.e. a (device, address) pair with its element type and shape;
run_with_iobinding hands the addresses straight to the compiled library, so a buffer that is
already right is never copied. Names are checked when bound (inputs) or at run time (outputs),
element types and shapes at run time, as onnxruntime does.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .errors import BindingError, InvalidArgument
from .ortvalue import OrtDevice, OrtValue, device_for, elem_type

if TYPE_CHECKING:
    from .session import InferenceSession


class IOBinding:
    def __init__(self, session: "InferenceSession"):
        self._session = session
        self._inputs: dict[str, OrtValue] = {}
        self._outputs: dict[str, OrtValue | OrtDevice] = {}   # preallocated value, or where to allocate
        self._results: dict[str, OrtValue] = {}               # last run's outputs, in binding order
        self._prepared = None   # the session's checked C arguments for these bindings; None after a change

    # ---- inputs -------------------------------------------------------------------------------
    def bind_cpu_input(self, name: str, arr_on_cpu) -> None:
        """Bind an input to a numpy array on the CPU (shared, not copied, when C-contiguous)."""
        if name not in self._session._in_by_name:
            raise BindingError(f"Failed to find NodeArg with name: {name} in the def list")
        if not isinstance(arr_on_cpu, np.ndarray):
            raise BindingError("Unable to create OrtValue from the given python object")
        self._inputs[name] = OrtValue.ortvalue_from_numpy(arr_on_cpu)
        self._prepared = None

    def bind_input(self, name: str, device_type, device_id: int, element_type, shape, buffer_ptr: int) -> None:
        """Bind an input to memory at ``buffer_ptr`` that the caller owns and keeps alive."""
        if name not in self._session._in_by_name:
            raise BindingError(f"Error when binding input: Failed to find input name in the mapping: {name}")
        dev = device_for(device_type, device_id)
        self._inputs[name] = OrtValue._from_address(buffer_ptr, elem_type(element_type), shape, dev)
        self._prepared = None

    def bind_ortvalue_input(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise TypeError(f"bind_ortvalue_input expects an OrtValue, got {type(ortvalue).__name__}")
        if name not in self._session._in_by_name:
            raise BindingError(f"Error when binding input: Failed to find input name in the mapping: {name}")
        self._inputs[name] = ortvalue
        self._prepared = None

    def synchronize_inputs(self) -> None:
        """Nothing to wait for on the CPU (a device with streams will wait here)."""

    def clear_binding_inputs(self) -> None:
        self._inputs.clear()
        self._prepared = None

    # ---- outputs ------------------------------------------------------------------------------
    def bind_output(self, name: str, device_type="cpu", device_id: int = 0, element_type=None, shape=None,
                    buffer_ptr: int | None = None) -> None:
        """Bind an output to preallocated memory at ``buffer_ptr`` (element type and shape then
        required), or only to a device: the session allocates it and reuses the buffer while the
        output's shape stays the same."""
        dev = device_for(device_type, device_id)
        if buffer_ptr is None:
            self._outputs[name] = dev
            self._prepared = None
            return
        if element_type is None or shape is None:
            raise InvalidArgument("`element_type` and `shape` are to be provided if pre-allocated memory is "
                                  "provided")
        self._outputs[name] = OrtValue._from_address(buffer_ptr, elem_type(element_type), shape, dev)
        self._prepared = None

    def bind_ortvalue_output(self, name: str, ortvalue: OrtValue) -> None:
        if not isinstance(ortvalue, OrtValue):
            raise TypeError(f"bind_ortvalue_output expects an OrtValue, got {type(ortvalue).__name__}")
        self._outputs[name] = ortvalue
        self._prepared = None

    def synchronize_outputs(self) -> None:
        """Nothing to wait for on the CPU (a device with streams will wait here)."""

    def clear_binding_outputs(self) -> None:
        self._outputs.clear()
        self._results = {}
        self._prepared = None

    def get_outputs(self) -> list[OrtValue]:
        """The OrtValues the last run_with_iobinding produced, in the order outputs were bound."""
        return list(self._results.values())

    def get_outputs_as_ortvaluevector(self) -> list[OrtValue]:
        return self.get_outputs()

    def copy_outputs_to_cpu(self) -> list[np.ndarray]:
        """The outputs as new numpy arrays (copies: later runs do not change them)."""
        return [v._host_array().copy() for v in self._results.values()]
