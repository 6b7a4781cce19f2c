"""PwDwConv (passes/fuse_pw_dw.py): a 1x1 convolution whose output feeds only a depthwise one,
run per panel of MR expanded channels. The panel's planes go to a thread's scratch (about an L2)
and the depthwise reads them from there, so the expanded tensor is never written to memory
(MobileNet's inverted residuals: the 1x1 expands channels 6x).

Inputs, by index: 0 X, 1 the 1x1's plain weights (unread), 2 its bias, 3 unused, 4 its weights
packed at compile time (passes/prepack.py), 5 the depthwise weights, 6 their bias, 7 the
depthwise's residual. The two original nodes are kept detached as attributes "_pw" and "_dw":
their own params() describe each half."""
from __future__ import annotations

from ..passes import PRIVATE_DOMAIN
from .conv import FusedConv
from .gemm import EPILOGUE_HEADERS
from .registry import OpSpec, lookup, register

PWDW_SLOTS = 8      # threads with a scratch slot each


def _align(n: int) -> int:
    return -(-n // 64) * 64


@register
class PwDwConv(OpSpec):
    op_type = "PwDwConv"
    domain = PRIVATE_DOMAIN
    template = "pwdw.c.j2"
    headers = FusedConv.headers + EPILOGUE_HEADERS

    def infer(self, node):
        y = node.attrs["_dw"].outputs[0]
        return [(y.etype, y.shape)]

    def params(self, node):
        pw, dw = node.attrs["_pw"], node.attrs["_dw"]
        a, b = lookup(pw).params(pw), lookup(dw).params(dw)
        hw = a["OSP"]
        e_bytes = _align(4 * a["pw"]["mr"] * hw)       # one panel's expanded planes
        tmp_bytes = a["pw"]["tmp_bytes"]
        f = b["dwf"]
        ph_bytes = f["slot_bytes"] if f and f["phases"] else 0
        return {"a": a, "b": b, "f": f, "HW": hw, "e_bytes": e_bytes, "tmp_bytes": tmp_bytes,
                "slot_bytes": e_bytes + tmp_bytes + _align(ph_bytes), "slots": PWDW_SLOTS,
                "N": node.inputs[0].shape[0]}

    def scratch(self, node):
        p = self.params(node)
        return p["slots"] * p["slot_bytes"]
