"""ImageDecoder (opset 20): the image's dims are run-time dims read from its header before the run
(one library decodes images of any size and format); the decoders must give Pillow's bytes exactly.
Checked against the onnx suite's frozen data (Pillow-made) and, when Pillow is installed, against
Pillow on random images of every mode and option it writes; truncated, corrupted and unsupported
data raise an onnxc error naming the node (never a crash)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.backend.test.case.node import _image_decoder_data as frozen

import onnxc

FORMATS = ("RGB", "BGR", "Grayscale")
OK = ("bmp_rgb", "png_rgb", "tiff_rgb", "pnm_rgb", "jpeg_rgb")
UNSUPPORTED = ("webp_rgb", "jpeg2k_rgb")


def _model(fmt, const=None):
    node = helper.make_node("ImageDecoder", ["data"], ["out"], pixel_format=fmt)
    out = [helper.make_tensor_value_info("out", TensorProto.UINT8, None)]
    if const is None:
        inputs = [helper.make_tensor_value_info("data", TensorProto.UINT8, ["N"])]
        g = helper.make_graph([node], "g", inputs, out)
    else:
        g = helper.make_graph([node], "g", [], out, [numpy_helper.from_array(const, "data")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


_SESSIONS: dict = {}


def _session(fmt):
    if fmt not in _SESSIONS:
        _SESSIONS[fmt] = onnxc.InferenceSession(_model(fmt).SerializeToString())
    return _SESSIONS[fmt]


def _frozen(name):
    data, out = getattr(frozen, f"image_decoder_decode_{name}")
    return np.asarray(data, np.uint8).reshape(-1), np.asarray(out, np.uint8)


def _luma(rgb):
    """Pillow's convert("L"): ITU-R 601-2 luma in 16-bit fixed point."""
    r = rgb.astype(np.uint32)
    return ((r[..., 0] * 19595 + r[..., 1] * 38470 + r[..., 2] * 7471 + 0x8000) >> 16).astype(np.uint8)[..., None]


def _expected(rgb, fmt):
    return rgb if fmt == "RGB" else rgb[..., ::-1] if fmt == "BGR" else _luma(rgb)


def _decode(fmt, data):
    return _session(fmt).run(None, {"data": data})[0]


@pytest.mark.parametrize("fmt", FORMATS)
def test_suite_images_one_library(fmt):
    """Every format through one library: each run resolves its own dims."""
    for name in OK:
        data, rgb = _frozen(name)
        got = _decode(fmt, data)
        assert got.dtype == np.uint8 and got.shape == rgb.shape[:2] + (1 if fmt == "Grayscale" else 3,)
        np.testing.assert_array_equal(got, _expected(rgb, fmt), err_msg=name)
    data, gray = _frozen("jpeg_grayscale")
    if fmt == "Grayscale":
        np.testing.assert_array_equal(_decode(fmt, data), gray)


def test_initializer_input():
    data, rgb = _frozen("png_rgb")
    sess = onnxc.InferenceSession(_model("RGB", const=data).SerializeToString())
    np.testing.assert_array_equal(sess.run(None, {})[0], rgb)


@pytest.mark.parametrize("name", OK)
def test_truncated_data_raises(name):
    data, _ = _frozen(name)
    for k in range(1, 10):
        with pytest.raises(onnxc.Error, match=r"node 0 \(ImageDecoder"):
            _decode("RGB", data[: len(data) * k // 10].copy())


@pytest.mark.parametrize("name", OK)
def test_corrupted_data_never_crashes(name):
    """Random byte changes: a decoded image of the header's size, or an onnxc error."""
    data, _ = _frozen(name)
    rng = np.random.default_rng(len(data))
    for _ in range(150):
        bad = data.copy()
        pos = rng.integers(0, len(bad), int(rng.integers(1, 6)))
        bad[pos] = rng.integers(0, 256, len(pos)).astype(np.uint8)
        try:
            got = _decode("BGR", bad)
        except onnxc.Error as e:
            assert "node 0 (ImageDecoder" in str(e)
        else:
            assert got.dtype == np.uint8 and got.ndim == 3 and got.shape[2] == 3


@pytest.mark.parametrize("data", [
    _frozen("webp_rgb")[0], _frozen("jpeg2k_rgb")[0], np.zeros(0, np.uint8), np.arange(200, dtype=np.uint8),
    np.frombuffer(b"GIF89a" + bytes(40), np.uint8),
], ids=["webp", "jpeg2000", "empty", "noise", "gif"])
def test_unsupported_or_unknown_format_raises(data):
    with pytest.raises(onnxc.Error, match=r"node 0 \(ImageDecoder"):
        _decode("RGB", data)


def test_header_claiming_a_huge_image_is_refused():
    """A tiny PNG whose header claims 16384 x 16384: refused before the workspace is sized."""
    data, _ = _frozen("png_rgb")
    bad = bytearray(data.tobytes())
    bad[16:24] = (16384).to_bytes(4, "big") * 2
    import zlib
    bad[29:33] = zlib.crc32(bytes(bad[12:29])).to_bytes(4, "big")
    with pytest.raises(onnxc.Error, match=r"node 0 \(ImageDecoder"):
        _decode("RGB", np.frombuffer(bytes(bad), np.uint8))


def test_bad_pixel_format_is_rejected():
    with pytest.raises(onnxc.Error, match="pixel_format"):
        onnxc.InferenceSession(_model("CMYK").SerializeToString())


# ---- random images against Pillow (when installed) -----------------------------------------------
def _random_image(rng, h, w):
    if rng.random() < 0.5:   # smooth with noise (JPEG's usual content)
        y, x = np.mgrid[0:h, 0:w]
        a = np.stack([(x * 7 + y * 3) % 256, (x * y) % 256, (255 - x * 5) % 256], -1)
        return (a + rng.integers(0, 40, (h, w, 3))).clip(0, 255).astype(np.uint8)
    return rng.integers(0, 256, (h, w, 3)).astype(np.uint8)


def _pillow_cases(rng, pil):
    for _ in range(6):
        h, w = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        img = pil.fromarray(_random_image(rng, h, w))
        for mode in ("RGB", "L"):
            for ss in (0, 1, 2):
                kw = dict(quality=int(rng.integers(5, 100)), subsampling=ss,
                          optimize=bool(rng.random() < 0.3))
                if rng.random() < 0.3:
                    kw["restart_marker_blocks"] = int(rng.integers(1, 5))
                yield f"jpeg {mode} {kw} {h}x{w}", img.convert(mode), "JPEG", kw
        for mode in ("RGB", "RGBA", "L", "LA", "P", "1"):
            yield f"png {mode}", img.convert(mode), "PNG", dict(compress_level=int(rng.integers(0, 10)))
            if mode != "LA":
                yield f"bmp {mode}", img.convert(mode), "BMP", {}
                yield f"tiff {mode}", img.convert(mode), "TIFF", {}
                yield f"tiff packbits {mode}", img.convert(mode), "TIFF", dict(compression="packbits")
            if mode in ("RGB", "L", "1"):
                yield f"ppm {mode}", img.convert(mode), "PPM", {}


def test_random_images_match_pillow():
    pil = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(0)
    for name, im, fmt_, kw in _pillow_cases(rng, pil):
        buf = io.BytesIO()
        im.save(buf, format=fmt_, **kw)
        data = np.frombuffer(buf.getvalue(), np.uint8)
        decoded = pil.open(io.BytesIO(buf.getvalue()))
        rgb, gray = np.array(decoded.convert("RGB")), np.array(decoded.convert("L"))[..., None]
        for fmt in FORMATS:
            exp = gray if fmt == "Grayscale" else _expected(rgb, fmt)
            np.testing.assert_array_equal(_decode(fmt, data), exp, err_msg=f"{name} as {fmt}")


def test_progressive_jpeg_is_unsupported():
    pil = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    pil.fromarray(_random_image(np.random.default_rng(1), 20, 20)).save(buf, format="JPEG", progressive=True)
    with pytest.raises(onnxc.Error, match=r"node 0 \(ImageDecoder"):
        _decode("RGB", np.frombuffer(buf.getvalue(), np.uint8))


# ---- PNG features Pillow does not write: Adam7, every row filter, 2/4/16-bit samples ---------
def _filter_row(ftype, cur, prev, bpp):
    cur, prev = cur.astype(np.int32), prev.astype(np.int32)
    left = np.concatenate([np.zeros(bpp, np.int32), cur[:-bpp]])
    upleft = np.concatenate([np.zeros(bpp, np.int32), prev[:-bpp]])
    if ftype == 0:
        pred = np.zeros_like(cur)
    elif ftype == 1:
        pred = left
    elif ftype == 2:
        pred = prev
    elif ftype == 3:
        pred = (left + prev) >> 1
    else:
        p = left + prev - upleft
        pa, pb, pc = np.abs(p - left), np.abs(p - prev), np.abs(p - upleft)
        pred = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
    return ((cur - pred) & 255).astype(np.uint8)


def _png(samples, depth, ctype, rng, interlace, plte=None):
    """samples: [H, W, C] ints of `depth` bits -> PNG bytes, random filter per row."""
    import struct
    import zlib

    def chunk(t, body):
        return struct.pack(">I", len(body)) + t + body + struct.pack(">I", zlib.crc32(t + body))

    h, w, c = samples.shape
    passes = ([(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
               (0, 1, 1, 2)] if interlace else [(0, 0, 1, 1)])
    raw = bytearray()
    bpp = max(1, c * depth // 8)
    for x0, y0, dx, dy in passes:
        sub = samples[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        prev = None
        for row in sub:
            flat = row.reshape(-1)
            if depth == 16:
                line = flat.astype(">u2").tobytes()
            elif depth == 8:
                line = flat.astype(np.uint8).tobytes()
            else:
                bits = np.unpackbits(flat.astype(np.uint8)[:, None], axis=1)[:, 8 - depth:].reshape(-1)
                line = np.packbits(bits).tobytes()
            cur = np.frombuffer(line, np.uint8)
            prev = np.zeros_like(cur) if prev is None else prev
            ft = int(rng.integers(0, 5))
            raw += bytes([ft]) + _filter_row(ft, cur, prev, bpp).tobytes()
            prev = cur
    z = zlib.compress(bytes(raw), int(rng.integers(0, 10)))
    cut = int(rng.integers(1, len(z)))   # two IDAT chunks
    body = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, int(interlace))
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", body)
    if plte is not None:
        out += chunk(b"PLTE", plte.astype(np.uint8).tobytes())
    out += chunk(b"IDAT", z[:cut]) + chunk(b"IDAT", z[cut:]) + chunk(b"IEND", b"")
    return np.frombuffer(out, np.uint8)


@pytest.mark.parametrize("interlace", [False, True])
def test_png_filters_interlace_depths(interlace):
    rng = np.random.default_rng(int(interlace))
    for h, w in [(1, 1), (3, 5), (9, 17), (16, 13)]:
        rgb16 = rng.integers(0, 65536, (h, w, 4))
        cases = [(rgb16[..., :3], 16, 2, (rgb16[..., :3] >> 8)), (rgb16, 16, 6, rgb16[..., :3] >> 8),
                 (rgb16[..., :2], 16, 4, np.repeat(rgb16[..., :1] >> 8, 3, -1))]
        for depth, scale in [(1, 255), (2, 85), (4, 17), (8, 1)]:
            g = rng.integers(0, 1 << depth, (h, w, 1))
            cases.append((g, depth, 0, np.repeat(g * scale, 3, -1)))
            pal = rng.integers(0, 256, (1 << depth, 3))
            cases.append((g, depth, 3, pal[g[..., 0]], pal))
        for case in cases:
            samples, depth, ctype, rgb = case[:4]
            data = _png(samples, depth, ctype, rng, interlace, case[4] if len(case) > 4 else None)
            for fmt in FORMATS:
                np.testing.assert_array_equal(_decode(fmt, data), _expected(rgb.astype(np.uint8), fmt),
                                              err_msg=f"{h}x{w} depth {depth} color type {ctype} {fmt}")
