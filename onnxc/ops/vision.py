"""Vision operators: Col2Im, CenterCropPad, AffineGrid, GridSample and RoiAlign.

Col2Im scatter-adds the columns of (N, C*prod(block), L) back into (N, C, *image_shape).
CenterCropPad crops or zero-pads each listed axis around its centre (the extra element of an odd
difference goes to the end). AffineGrid maps the normalised base grid of `size` through theta.
GridSample samples X at the grid's normalised points (the grid's last axis lists x, y, ... i.e.
the spatial dims in reverse) with nearest / linear / cubic taps per dim; each tap index is mapped
by the padding mode on its own, as onnx's reference and PyTorch do. RoiAlign averages (or takes
the max of the weighted corner values, as onnxruntime does) bilinear samples per output bin.
Shape-like inputs (image_shape, block_shape, shape, size) are constants or come from the caller's
data: then onnxc_resolve reads them before the run (onnxc.dynamic, templates/c/resolve/).
"""
from __future__ import annotations

import numpy as np

from .. import dtypes
from ..symbolic import dim_repr, product
from .common import attr_enum, attr_int, attr_ints, const_input, fail, norm_axis, schema_types
from .gemm import c_float
from .normalization import FLOATS, check_float
from .registry import OpSpec, register

MAX_ELEMS = 1 << 40   # no tensor dim product may exceed this (keeps every C index in int64)


def _ints(node, i, what, n=None):
    v = const_input(node, i, what)
    v = [int(x) for x in np.asarray(v).reshape(-1)]
    if n is not None and len(v) != n:
        raise fail(node, f"input {what} has {len(v)} values, expected {n}")
    return v


def _check_size(node, dims, what):
    total = 1
    for d in dims:
        if isinstance(d, int):
            total *= max(d, 1)
    if total > MAX_ELEMS:
        raise fail(node, f"{what} ({', '.join(map(dim_repr, dims))}) is too large")


def _numeric(node, et, what="input"):
    if et in (dtypes.BY_NAME.get("string"), dtypes.BOOL):
        from ..errors import NotImplemented as OrtNotImplemented
        raise OrtNotImplemented(f"{node.describe()}: {what} of element type {et.name} is not supported")


@register
class Col2Im(OpSpec):
    op_type = "Col2Im"
    since = 18
    template = "vision_col2im.c.j2"

    def _geom(self, node):
        from ..ir import Value
        from .slice_pad import int_source
        x = node.inputs[0]
        if x.rank != 3:
            raise fail(node, f"input must be (N, C*prod(block_shape), L), got rank {x.rank}")
        if getattr(node, "dyn_params", None) is not None:
            return node.dyn_params
        image, block = int_source(node, 1, "image_shape"), int_source(node, 2, "block_shape")
        if image is None or block is None:
            raise fail(node, "inputs 1 (image_shape) and 2 (block_shape) are required")
        if isinstance(image, Value) or isinstance(block, Value):
            node.dyn_params = self._from_data(node, image, block)
            return node.dyn_params
        ns = len(image)
        if len(block) != ns:
            raise fail(node, f"input block_shape has {len(block)} values, expected {ns}")
        if ns < 1 or any(v < 1 for v in image) or any(v < 1 for v in block):
            raise fail(node, f"image_shape={image} and block_shape={block} must be positive")
        dil = attr_ints(node, "dilations") or [1] * ns
        pads = attr_ints(node, "pads") or [0] * (2 * ns)
        strides = attr_ints(node, "strides") or [1] * ns
        if len(dil) != ns or any(v < 1 for v in dil):
            raise fail(node, f"attribute dilations={dil} must give {ns} values >= 1")
        if len(strides) != ns or any(v < 1 for v in strides):
            raise fail(node, f"attribute strides={strides} must give {ns} values >= 1")
        if len(pads) != 2 * ns or any(v < 0 for v in pads):
            raise fail(node, f"attribute pads={pads} must give {2 * ns} values >= 0")
        _check_size(node, image + block, "image_shape and block_shape")
        nb = [(image[k] + pads[k] + pads[ns + k] - dil[k] * (block[k] - 1) - 1) // strides[k] + 1
              for k in range(ns)]
        if any(v < 1 for v in nb):
            raise fail(node, f"the number of sliding blocks {nb} is not positive")
        K, L = int(np.prod(block)), int(np.prod(nb))
        ck = x.shape[1]
        if not isinstance(ck, int):
            raise fail(node, "input dim 1 (C * prod(block_shape)) must be static")
        if ck % K:
            raise fail(node, f"input dim 1 ({ck}) is not divisible by prod(block_shape)={K}")
        if isinstance(x.shape[2], int) and x.shape[2] != L:
            raise fail(node, f"input dim 2 ({x.shape[2]}) must equal the number of blocks {L} ({nb})")
        return dict(image=image, block=block, dil=dil, pads=pads[:ns], strides=strides, nb=nb,
                    K=K, L=L, C=ck // K, ns=ns, run=False)

    def _attrs(self, node, ns):
        dil = attr_ints(node, "dilations") or [1] * ns
        pads = attr_ints(node, "pads") or [0] * (2 * ns)
        strides = attr_ints(node, "strides") or [1] * ns
        if len(dil) != ns or any(not 1 <= v <= MAX_ELEMS for v in dil):
            raise fail(node, f"attribute dilations={dil} must give {ns} values >= 1")
        if len(strides) != ns or any(not 1 <= v <= MAX_ELEMS for v in strides):
            raise fail(node, f"attribute strides={strides} must give {ns} values >= 1")
        if len(pads) != 2 * ns or any(not 0 <= v <= MAX_ELEMS for v in pads):
            raise fail(node, f"attribute pads={pads} must give {2 * ns} values >= 0")
        return dil, pads, strides

    def _from_data(self, node, image, block):
        """image_shape and/or block_shape from the caller: C and the image dims are resolved
        before the run, with the block dims, block counts and prod(block) as parameters."""
        from .. import dynamic
        from .slice_pad import check_before_run, resolve_sources, src_len
        x = node.inputs[0]
        ns = src_len(image)
        if src_len(block) != ns or ns < 1:
            raise fail(node, f"image_shape and block_shape must have the same number (>= 1) of values")
        dil, pads, strides = self._attrs(node, ns)
        ck = x.shape[1]
        if not isinstance(ck, int):
            raise fail(node, "input dim 1 (C * prod(block_shape)) must be static")
        check_before_run(node, x.shape)
        ins, src = resolve_sources({"image": image, "block": block})
        syms = dynamic.resolved(node, 1 + ns, "col2im.c.j2", ins,
                                {**src, "ns": ns, "dil": dil, "pads": pads, "strides": strides,
                                 "ck": ck, "L": x.shape[2], "N": x.shape[0]}, values=2 * ns + 1)
        image_d, block_d = syms[1:1 + ns], syms[1 + ns:1 + 2 * ns]
        nb_d, K = syms[1 + 2 * ns:1 + 3 * ns], syms[1 + 3 * ns]
        return dict(image=image_d, block=block_d, dil=dil, pads=pads[:ns], strides=strides, nb=nb_d,
                    K=K, L=x.shape[2], C=syms[0], ns=ns, run=True)

    def infer(self, node):
        x = node.inputs[0]
        _numeric(node, x.etype)
        g = self._geom(node)
        return [(x.etype, (x.shape[0], g["C"], *g["image"]))]

    def params(self, node):
        g = self._geom(node)
        x = node.inputs[0]
        return {**g, "planes": x.shape[0] * g["C"], "P": product(g["image"]),
                "check_L": not g["run"] and not isinstance(x.shape[2], int), "work": product(x.shape)}


@register
class CenterCropPad(OpSpec):
    op_type = "CenterCropPad"
    since = 18
    template = "vision_center_crop_pad.c.j2"

    def _geom(self, node):
        x = node.inputs[0]
        _numeric(node, x.etype)
        axes = attr_ints(node, "axes")
        axes = list(range(x.rank)) if axes is None else [norm_axis(node, a, x.rank, "axes") for a in axes]
        if len(set(axes)) != len(axes):
            raise fail(node, f"attribute axes={axes} has repeats")
        if getattr(node, "dyn_params", None) is not None:
            return node.dyn_params
        from ..ir import Value
        from .common import data_input
        sv = data_input(node, 1, "shape")
        if isinstance(sv, Value):
            node.dyn_params = self._from_data(node, sv, axes)
            return node.dyn_params
        shape = _ints(node, 1, "shape", len(axes))
        if any(v < 0 for v in shape):
            raise fail(node, f"input shape={shape} has negative values")
        _check_size(node, shape, "shape")
        out = list(x.shape)
        src = [0] * x.rank
        dst = [0] * x.rank
        ext = list(x.shape)
        for a, sh in zip(axes, shape):
            dim = x.shape[a]
            if not isinstance(dim, int):
                raise fail(node, f"input dim {a} must be static to crop or pad it")
            out[a] = sh
            ext[a] = min(sh, dim)
            if sh < dim:
                src[a] = (dim - sh) // 2
            elif sh > dim:
                dst[a] = (sh - dim) // 2
        return out, src, dst, ext

    def _from_data(self, node, sv, axes):
        """shape from the caller: the listed output dims are resolved before the run, with each
        axis's copy start in X and in Y and its copied extent as parameters."""
        from .. import dynamic
        from .slice_pad import check_before_run
        x = node.inputs[0]
        if sv.etype != dtypes.INT64 or sv.rank != 1 or sv.shape[0] != len(axes):
            raise fail(node, f"input shape must be a 1-D int64 tensor of {len(axes)} values")
        check_before_run(node, [x.shape[a] for a in axes])
        m = len(axes)
        syms = dynamic.resolved(node, m, "center_crop_pad.c.j2", [sv],
                                {"dims": [x.shape[a] for a in axes], "all": list(x.shape)},
                                values=3 * m)
        out, src, dst, ext = list(x.shape), [0] * x.rank, [0] * x.rank, list(x.shape)
        for j, a in enumerate(axes):
            out[a] = syms[j]
            src[a], dst[a], ext[a] = syms[m + 3 * j:m + 3 * j + 3]
        return out, src, dst, ext

    def infer(self, node):
        out, *_ = self._geom(node)
        return [(node.inputs[0].etype, tuple(out))]

    def params(self, node):
        x = node.inputs[0]
        out, src, dst, ext = self._geom(node)
        r = x.rank
        ist = [product(x.shape[k + 1:]) for k in range(r)]
        ost = [product(out[k + 1:]) for k in range(r)]
        pad = any(not (isinstance(o, int) and isinstance(e, int)) or o != e for o, e in zip(out, ext))
        if r == 0:
            ext, src, dst, ist, ost = [1], [0], [0], [1], [1]
        return {"ext": ext, "src": src, "dst": dst, "ist": ist, "ost": ost, "pad": pad,
                "src0": sum(s * t for s, t in zip(src, ist)) if r else 0,
                "dst0": sum(s * t for s, t in zip(dst, ost)) if r else 0}


@register
class AffineGrid(OpSpec):
    op_type = "AffineGrid"
    since = 20
    template = "vision_affine_grid.c.j2"

    def _geom(self, node):
        from ..ir import Value
        from .common import data_input
        theta = node.inputs[0]
        check_float(node, theta.etype)
        dyn = getattr(node, "dyn_params", None)
        if dyn is None and isinstance(data_input(node, 1, "size"), Value):
            dyn = self._from_data(node, node.inputs[1])
        if dyn is not None:
            return dyn["size"], dyn["nd"]
        size = _ints(node, 1, "size")
        if len(size) not in (4, 5) or any(v < 0 for v in size):
            raise fail(node, f"input size={size} must be (N, C, H, W) or (N, C, D, H, W), non-negative")
        nd = len(size) - 2
        _check_size(node, size, "size")
        if theta.rank != 3 or theta.shape[1:] != (nd, nd + 1):
            raise fail(node, f"theta must be (N, {nd}, {nd + 1}) for size {size}")
        if isinstance(theta.shape[0], int) and theta.shape[0] != size[0]:
            raise fail(node, f"theta's batch {theta.shape[0]} differs from size[0]={size[0]}")
        return size, nd

    def _from_data(self, node, v):
        """size passed by the caller: the spatial dims are run-time dims, N must equal theta's
        batch (templates/c/resolve/affinegrid.c.j2 checks both before the run)."""
        from .. import dynamic
        theta = node.inputs[0]
        if v.rank != 1 or v.etype != dtypes.INT64 or v.shape[0] not in (4, 5):
            raise fail(node, "input 1 (size) must be a 1-D int64 tensor of 4 or 5 values")
        nd = v.shape[0] - 2
        if theta.rank != 3 or theta.shape[1:] != (nd, nd + 1):
            raise fail(node, f"theta must be (N, {nd}, {nd + 1}) for a size of {nd + 2} values")
        sp = dynamic.resolved(node, nd, "affinegrid.c.j2", [v], {"n": theta.shape[0], "nd": nd})
        node.dyn_params = {"size": [theta.shape[0], None, *sp], "nd": nd}
        return node.dyn_params

    def infer(self, node):
        size, nd = self._geom(node)
        return [(node.inputs[0].etype, (size[0], *size[2:], nd))]

    def params(self, node):
        size, nd = self._geom(node)
        sp = [1] * (3 - nd) + size[2:]            # (D, H, W), D = 1 in 2-D
        # base coordinate of index i along a dim: a + i * b, computed in double in the kernel
        return {"N": size[0], "sp": sp, "nd": nd, "ac": bool(node.attr("align_corners", 0)),
                "row": sp[2] * nd, "work": product(size[:1] + sp)}


_GS_MODES = {16: {"bilinear": "linear", "nearest": "nearest", "bicubic": "cubic"},
             20: {"linear": "linear", "nearest": "nearest", "cubic": "cubic"}}


@register
class GridSample(OpSpec):
    op_type = "GridSample"
    since = 16
    template = "vision_grid_sample.c.j2"

    def _geom(self, node):
        x, grid = node.inputs[0], node.inputs[1]
        check_float(node, x.etype)
        check_float(node, grid.etype)
        schema_types(node)
        if x.rank < 3 or (node.opset < 20 and x.rank != 4):
            raise fail(node, f"input X must be (N, C, spatial...) (4-D before opset 20), got rank {x.rank}")
        r = x.rank - 2
        if grid.rank != x.rank or grid.shape[-1] != r:
            raise fail(node, f"grid must be (N, out spatial..., {r}), got rank {grid.rank}")
        modes = _GS_MODES[16 if node.opset < 20 else 20]
        mode = modes[attr_enum(node, "mode", modes)]
        pad = attr_enum(node, "padding_mode", ("zeros", "border", "reflection"))
        taps = {"nearest": 1, "linear": 2, "cubic": 4}[mode]
        if taps ** r > 4096:
            raise fail(node, f"{mode} sampling over {r} dims needs {taps ** r} taps per point (max 4096)")
        return x, grid, r, mode, pad, taps

    def infer(self, node):
        x, grid, r, *_ = self._geom(node)
        return [(x.etype, (x.shape[0], x.shape[1], *grid.shape[1:-1]))]

    def params(self, node):
        x, grid, r, mode, pad, taps = self._geom(node)
        return {"r": r, "mode": mode, "pad": pad, "T": taps, "combos": taps ** r,
                "ac": bool(node.attr("align_corners", 0)), "N": x.shape[0], "C": x.shape[1],
                "dims": list(reversed(x.shape[2:])),   # dims in grid-component order (x, y, ...)
                "xst": list(reversed([product(x.shape[2 + k + 1:]) for k in range(r)])),
                "P": product(x.shape[2:]), "O": product(grid.shape[1:-1]),
                "work": product(x.shape[:2]) * product(grid.shape[1:-1]) * taps ** r}


@register
class RoiAlign(OpSpec):
    op_type = "RoiAlign"
    since = 10
    template = "vision_roi_align.c.j2"

    def _geom(self, node):
        x, rois, bi = node.inputs[0], node.inputs[1], node.inputs[2]
        check_float(node, x.etype)
        schema_types(node)
        if x.rank != 4:
            raise fail(node, f"input X must be (N, C, H, W), got rank {x.rank}")
        if rois.rank != 2 or rois.shape[1] != 4:
            raise fail(node, "input rois must be (num_rois, 4)")
        if bi.rank != 1:
            raise fail(node, "input batch_indices must be 1-D")
        if isinstance(bi.shape[0], int) and isinstance(rois.shape[0], int) and bi.shape[0] != rois.shape[0]:
            raise fail(node, f"rois has {rois.shape[0]} rows but batch_indices {bi.shape[0]}")
        mode = attr_enum(node, "mode", ("avg", "max"))
        ctm = "output_half_pixel"
        if node.opset >= 16:
            ctm = attr_enum(node, "coordinate_transformation_mode", ("half_pixel", "output_half_pixel"))
        oh, ow = attr_int(node, "output_height", 1), attr_int(node, "output_width", 1)
        sr = attr_int(node, "sampling_ratio", 0)
        if oh < 1 or ow < 1 or oh * ow > MAX_ELEMS:
            raise fail(node, f"attributes output_height={oh}, output_width={ow} must be >= 1")
        if sr < 0 or sr > 1 << 16:
            raise fail(node, f"attribute sampling_ratio={sr} must be in [0, 65536]")
        return x, rois, bi, mode, ctm == "half_pixel", oh, ow, sr

    def infer(self, node):
        x, rois, bi, mode, hp, oh, ow, sr = self._geom(node)
        return [(x.etype, (bi.shape[0], x.shape[1], oh, ow))]

    def params(self, node):
        x, rois, bi, mode, hp, oh, ow, sr = self._geom(node)
        ct = x.etype.cc
        return {"mode": mode, "offset": c_float(0.5 if hp else 0.0, ct), "hp": hp, "oh": oh, "ow": ow,
                "sr": sr, "scale": c_float(float(node.attr("spatial_scale", 1.0)), ct),
                "R": bi.shape[0], "Rr": rois.shape[0], "N": x.shape[0], "C": x.shape[1],
                "H": x.shape[2], "W": x.shape[3], "work": bi.shape[0] * x.shape[1] * oh * ow * 16}
