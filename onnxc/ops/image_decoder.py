"""ImageDecoder (opset 20): a 1-D uint8 tensor holding an encoded image -> uint8 [H, W, C].

H and W follow from the image header, read before the run by templates/c/resolve/image_decoder.c.j2
(a third resolved dim is the workspace the format needs); the kernel decodes with the hand-written
decoders of runtime_c/onnxc_image.h (BMP, PNM, PNG, TIFF, baseline JPEG), which reproduce what
Pillow (libjpeg-turbo, zlib) outputs byte for byte. Unsupported formats fail the run (value error
naming the node)."""
from __future__ import annotations

from .. import dynamic, dtypes
from ..errors import NotImplemented as OrtNotImplemented
from ..symbolic import product
from .common import attr_enum, fail
from .registry import OpSpec, register

FORMATS = {"RGB": 0, "BGR": 1, "Grayscale": 2}


@register
class ImageDecoder(OpSpec):
    op_type = "ImageDecoder"
    since = 20
    template = "image_decoder.c.j2"
    headers = ("onnxc_image.h",)

    def _dims(self, node):
        dyn = getattr(node, "dyn_params", None)
        if dyn is not None:
            return dyn
        x = node.inputs[0]
        fmt = attr_enum(node, "pixel_format", FORMATS)
        if x.etype.name != "uint8" or x.rank != 1:
            raise fail(node, f"input 0 (encoded_stream) must be a 1-D uint8 tensor, got "
                             f"{x.etype.name} of rank {x.rank}")
        if not dynamic.readable_before_run(x):
            raise OrtNotImplemented(f"{node.describe()}: input 0 (encoded_stream) must be a graph "
                                    "input or an initializer; images computed at run time come later")
        n = x.shape[0]
        h, w, work = dynamic.resolved(node, 3, "image_decoder.c.j2", [x], {"n": n})
        node.dyn_params = {"h": h, "w": w, "work": work, "n": n, "c": 1 if fmt == "Grayscale" else 3,
                           "fmt": FORMATS[fmt]}
        return node.dyn_params

    def infer(self, node):
        d = self._dims(node)
        return [(dtypes.BY_NAME["uint8"], (d["h"], d["w"], d["c"]))]

    def params(self, node):
        return dict(self._dims(node))

    def scratch(self, node):
        # the decoded RGB image, then the format's own workspace (counted by the header probe)
        d = self._dims(node)
        return 3 * product([d["h"], d["w"]]) + d["work"] + 64
