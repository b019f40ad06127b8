"""Checkpoint layouts inside .evermind packages, each parsed as hostile input (lengths checked before
slicing, bodies of exactly the size their header implies, typed BlobErrors):

  MoE0  builderforce's SharedExpertMoE weights (no checksum in the format)
  EVL0  builderforce's EvermindLM weights, with its [0x52435645][crc32] trailer
  VRQ0  builderforce's VideoRVQ codec (header and INTRA / INTER codebooks)
  EVT0  our named-tensor layout (TransformerLM and any model with named f32 weights), CRC-32 trailer

Layouts know tensor names, shapes and bytes; which model a layout belongs to is evermind_vk.files' business.
"""
from __future__ import annotations

import math
import struct
import zlib

import numpy as np

from ..errors import FormatError, IntegrityError, LimitError, NonFiniteError, TruncatedError

MOE0, EVL0, VRQ0, EVT0, CRC_MAGIC = 0x4D6F4530, 0x45564C30, 0x56525130, 0x45565430, 0x52435645


# -- checksum and f16 -------------------------------------------------------------------------------
def crc32(data: bytes) -> int:
    """IEEE CRC-32 (poly 0xEDB88320, init and xorout ~0)."""
    return zlib.crc32(bytes(data)) & 0xFFFFFFFF


def to_f16(a: np.ndarray) -> np.ndarray:
    """float32 -> float16 with round-to-nearest-even (builderforce truncates the mantissa)."""
    return np.asarray(a, np.float32).astype(np.float16)


# -- small readers ----------------------------------------------------------------------------------
def _u32s(buf: bytes, off: int, n: int, what: str) -> tuple:
    if off + 4 * n > len(buf):
        raise TruncatedError(f"{what}: header needs {off + 4 * n} bytes, blob has {len(buf)}")
    return struct.unpack_from(f"<{n}I", buf, off)


def _floats(buf: bytes, off: int, count: int, fp16: bool, what: str) -> tuple[np.ndarray, int]:
    size = count * (2 if fp16 else 4)
    if off + size > len(buf):
        raise TruncatedError(f"{what}: body needs {size} bytes at {off}, blob has {len(buf) - off}")
    arr = np.frombuffer(buf, dtype="<f2" if fp16 else "<f4", count=count, offset=off).astype(np.float32)
    return arr, off + size


def _exact_end(buf: bytes, off: int, what: str) -> None:
    if off != len(buf):
        raise FormatError(f"{what}: {len(buf) - off} bytes after the parameters")


def nonfinite_count(a: np.ndarray, chunk: int = 1 << 20) -> int:
    """How many NaN/Inf values a float array holds (in chunks: no full-size temporary)."""
    a = np.asarray(a)
    if a.dtype.kind not in "fc":
        return 0
    flat = a.reshape(-1)
    # each chunk's own non-finite count (its length minus its finite count), summed: exact at every size
    return int(sum(flat[i:i + chunk].size - np.count_nonzero(np.isfinite(flat[i:i + chunk]))
                   for i in range(0, flat.size, chunk)))


def nonfinite_tensors(tree, prefix: str = "") -> list:
    """[(name, NaN/Inf count)] of every float array with any, anywhere in a (nested dict / list) tree of
    named arrays (names joined with "."), in tree order."""
    out, stack = [], [(prefix, tree)]
    while stack:
        name, v = stack.pop()
        if isinstance(v, dict):
            stack.extend((f"{name}.{k}" if name else str(k), x) for k, x in reversed(list(v.items())))
        elif isinstance(v, (list, tuple)):
            stack.extend((f"{name}[{i}]", x) for i, x in reversed(list(enumerate(v))))
        elif isinstance(v, (np.ndarray, np.floating)):
            c = nonfinite_count(np.asarray(v))
            if c:
                out.append((name, c))
    return out


def refuse_nonfinite(tree, where: str, allow_nonfinite: bool = False, verb: str = "load") -> None:
    """NonFiniteError naming each tensor of tree holding NaN/Inf (and its count), unless allow_nonfinite.
    The one rule for weights on save, load and resume: non-finite values never persist silently."""
    if allow_nonfinite:
        return
    bad = nonfinite_tensors(tree)
    if bad:
        names = ", ".join(f"{n} ({c} NaN/Inf)" for n, c in bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10
                                                                          else "")
        raise NonFiniteError(f"{where}: non-finite values in {names}; refusing to {verb} "
                             f"(pass allow_nonfinite=True to {verb} anyway)")


def _flat(fp16: bool, arrays) -> bytes:
    return b"".join((to_f16(a) if fp16 else np.asarray(a, np.float32)).astype("<f2" if fp16 else "<f4").tobytes()
                    for a in arrays)


# -- MoE0 / EVL0 layouts ----------------------------------------------------------------------------
def _moe_shapes(prefix: str, d: int, h: int, E: int) -> list:
    mlp = lambda p: [(p + "w1", (h, d)), (p + "b1", (h,)), (p + "w2", (d, h)), (p + "b2", (d,))]  # noqa: E731
    out = [(prefix + "wr", (E, d))] + mlp(prefix + "shared.")
    for e in range(E):
        out += mlp(f"{prefix}expert{e}.")
    return out


def _moe_count(d: int, h: int, E: int) -> int:
    """Parameter count of _moe_shapes(d, h, E), computed without building the list."""
    return E * d + (E + 1) * (2 * h * d + h + d)


def _evl_count(V, d, L, K, h, E) -> int:
    return V * d + L * (d * K + 2 * d + _moe_count(d, h, E))


def _positive(name: str, v) -> int:
    if not isinstance(v, int) or v < 1 or v > 1 << 24:
        raise FormatError(f"{name} = {v} is not a plausible positive dimension")
    return v


def parse_moe0(buf: bytes) -> dict:
    """MoE0 checkpoint -> {"config": {...}, "params": {name: array}}; exact length, no CRC (format)."""
    magic, ver, d, h, E, k = _u32s(buf, 0, 6, "MoE0")
    if magic != MOE0:
        raise FormatError("bad magic (not an MoE0 checkpoint)")
    if ver not in (1, 2):
        raise FormatError(f"MoE0 version {ver} unknown (1 = f32, 2 = fp16)")
    d, h, E = _positive("modelDim", d), _positive("hiddenDim", h), _positive("numExperts", E)
    if not 1 <= k <= E:
        raise FormatError(f"topK {k} outside 1..{E}")
    need = 24 + _moe_count(d, h, E) * (2 if ver == 2 else 4)  # checked before any list of shapes is built
    if need != len(buf):
        raise (TruncatedError if need > len(buf) else FormatError)(f"MoE0 body: {len(buf)} bytes, header implies {need}")
    shapes = _moe_shapes("", d, h, E)
    off, params = 24, {}
    for name, shape in shapes:
        a, off = _floats(buf, off, math.prod(shape), ver == 2, "MoE0")
        params[name] = a.reshape(shape)
    return {"config": {"modelDim": d, "hiddenDim": h, "numExperts": E, "topK": k}, "params": params}


def evl_shapes(V, d, L, K, h, E) -> list:
    """(name, shape) of every EVL0 parameter, in file order, for vocabulary V, width d, L layers, conv
    kernel K, hidden h and E experts."""
    shapes = [("emb", (V, d))]
    for i in range(L):
        p = f"layer{i}."
        shapes += [(p + "conv", (d, K)), (p + "nConv", (d,)), (p + "nMoe", (d,))] + _moe_shapes(p + "moe.", d, h, E)
    return shapes


def parse_evl0(buf: bytes, require_crc: bool = True) -> dict:
    """EVL0 checkpoint (with its [0x52435645][crc32] trailer) -> config + params; exact length."""
    magic, ver, V, d, L, K, h, E, k = _u32s(buf, 0, 9, "EVL0")
    if magic != EVL0:
        raise FormatError("bad magic (not an EVL0 checkpoint)")
    if ver not in (1, 2):
        raise FormatError(f"EVL0 version {ver} unknown (1 = f32, 2 = fp16)")
    V, d, L, K = (_positive(n, x) for n, x in (("vocabSize", V), ("dModel", d), ("numLayers", L), ("convKernel", K)))
    h, E = _positive("hiddenDim", h), _positive("numExperts", E)
    if not 1 <= k <= E:
        raise FormatError(f"topK {k} outside 1..{E}")
    body = 36 + _evl_count(V, d, L, K, h, E) * (2 if ver == 2 else 4)  # before any list of shapes is built
    if len(buf) == body + 8 and struct.unpack_from("<I", buf, body)[0] == CRC_MAGIC:
        if struct.unpack_from("<I", buf, body + 4)[0] != crc32(buf[:body]):
            raise IntegrityError("checkpoint failed CRC integrity check (corrupt or truncated)")
        crc = True
    elif len(buf) == body and not require_crc:
        crc = False
    else:
        raise (TruncatedError if len(buf) < body + 8 else FormatError)(
            f"EVL0: {len(buf)} bytes, header implies {body} + 8-byte CRC trailer")
    off, params = 36, {}
    for name, shape in evl_shapes(V, d, L, K, h, E):
        a, off = _floats(buf, off, math.prod(shape), ver == 2, "EVL0")
        params[name] = a.reshape(shape)
    cfg = {"vocabSize": V, "dModel": d, "numLayers": L, "convKernel": K, "hiddenDim": h, "numExperts": E, "topK": k}
    return {"config": cfg, "params": params, "crc": crc}


def build_evl0(cfg: dict, params: dict, fp16: bool = False) -> bytes:
    """An EVL0 checkpoint (builderforce's EvermindLM layout) from its config dict and named parameters, f32
    or f16, with its CRC trailer."""
    shapes = evl_shapes(cfg["vocabSize"], cfg["dModel"], cfg["numLayers"], cfg["convKernel"], cfg["hiddenDim"],
                         cfg["numExperts"])
    head = struct.pack("<9I", EVL0, 2 if fp16 else 1, *(cfg[n] for n in ("vocabSize", "dModel", "numLayers",
                                                                         "convKernel", "hiddenDim", "numExperts", "topK")))
    body = head + _flat(fp16, [np.asarray(params[n], np.float32).reshape(s) for n, s in shapes])
    return body + struct.pack("<II", CRC_MAGIC, crc32(body))


def parse_vrq0(buf: bytes) -> dict:
    """VRQ0 codec: header fields and the INTRA / INTER codebooks [levels, K, patch^2 C]; exact length."""
    magic, H, W, C, patch, levels, K, kfi, tv = _u32s(buf, 0, 9, "VRQ0")
    if magic != VRQ0:
        raise FormatError("bad magic (not a VRQ0 blob)")
    for n, x in (("height", H), ("width", W), ("channels", C), ("patch", patch), ("levels", levels), ("K", K),
                 ("keyframeInterval", kfi)):
        _positive(n, x)
    latent = patch * patch * C
    count = levels * K * latent
    need = 36 + 2 * count * 4
    if need != len(buf):
        raise (TruncatedError if need > len(buf) else FormatError)(f"VRQ0: {len(buf)} bytes, header implies {need}")
    intra, off = _floats(buf, 36, count, False, "VRQ0")
    inter, off = _floats(buf, off, count, False, "VRQ0")
    return {"height": H, "width": W, "channels": C, "patch": patch, "levels": levels, "K": K,
            "keyframeInterval": kfi, "textVocabSize": tv, "intra": intra.reshape(levels, K, latent),
            "inter": inter.reshape(levels, K, latent)}


# -- EVT0: our TransformerLM ------------------------------------------------------------------------
def build_evt0(state: dict, fp16: bool = False) -> bytes:
    """u32 magic, u32 version (1 f32 | 2 f16), u32 count; per tensor (sorted by name): u32 name length,
    name (UTF-8), u32 ndim, u32 dims, data (little-endian); then the CRC-32 trailer."""
    names = sorted(state)
    parts = [struct.pack("<3I", EVT0, 2 if fp16 else 1, len(names))]
    for n in names:
        a = np.asarray(state[n], np.float32)
        nb = n.encode("utf-8")
        parts += [struct.pack("<I", len(nb)), nb, struct.pack(f"<I{a.ndim}I", a.ndim, *a.shape), _flat(fp16, [a])]
    body = b"".join(parts)
    return body + struct.pack("<II", CRC_MAGIC, crc32(body))


def parse_evt0(buf: bytes) -> tuple[dict, bool]:
    """(named arrays, fp16) from an EVT0 checkpoint; FormatError / TruncatedError on a malformed one."""
    magic, ver, count = _u32s(buf, 0, 3, "EVT0")
    if magic != EVT0:
        raise FormatError("bad magic (not an EVT0 checkpoint)")
    if ver not in (1, 2):
        raise FormatError(f"EVT0 version {ver} unknown")
    if len(buf) < 20 or struct.unpack_from("<I", buf, len(buf) - 8)[0] != CRC_MAGIC:
        raise TruncatedError("EVT0: missing CRC trailer")
    body = buf[:-8]
    if struct.unpack_from("<I", buf, len(buf) - 4)[0] != crc32(body):
        raise IntegrityError("checkpoint failed CRC integrity check (corrupt or truncated)")
    if count > len(body) // 9:
        raise LimitError(f"EVT0 claims {count} tensors in {len(body)} bytes")
    off, out = 12, {}
    for _ in range(count):
        (nlen,) = _u32s(body, off, 1, "EVT0 name")
        if off + 4 + nlen > len(body):
            raise TruncatedError("EVT0: name runs past the body")
        try:
            name = body[off + 4:off + 4 + nlen].decode("utf-8")
        except UnicodeDecodeError as e:
            raise FormatError(f"EVT0: tensor name is not UTF-8: {e}") from e
        off += 4 + nlen
        (ndim,) = _u32s(body, off, 1, "EVT0 ndim")
        if ndim > 8:
            raise FormatError(f"EVT0: {ndim} dimensions")
        dims = _u32s(body, off + 4, ndim, "EVT0 dims")
        off += 4 + 4 * ndim
        n = math.prod(dims)
        if n * (2 if ver == 2 else 4) > len(body) - off:
            raise TruncatedError(f"EVT0: tensor {name!r} {dims} runs past the body")
        a, off = _floats(body, off, n, ver == 2, "EVT0")
        if name in out:
            raise FormatError(f"EVT0: duplicate tensor {name!r}")
        out[name] = a.reshape(dims)
    _exact_end(body, off, "EVT0")
    return out, ver == 2


# -- MoE0 writer (builderforce's SharedExpertMoE.exportWeights layout) -------------------------------
def build_moe0(cfg: dict, params: dict, fp16: bool = False) -> bytes:
    """MoE0 bytes: 6 u32 [magic, 1 = f32 | 2 = fp16, modelDim, hiddenDim, numExperts, topK] and the
    parameters in builderforce's order (wr, shared.*, expert{e}.*); no checksum (the format has none)."""
    d, h, E, k = (cfg[n] for n in ("modelDim", "hiddenDim", "numExperts", "topK"))
    head = struct.pack("<6I", MOE0, 2 if fp16 else 1, d, h, E, k)
    return head + _flat(fp16, [np.asarray(params[n], np.float32).reshape(s) for n, s in _moe_shapes("", d, h, E)])


# -- VRQ0 writer (builderforce's VideoRVQCodec.serialize layout) -----------------------------------------
def build_vrq0(header: dict, intra: np.ndarray, inter: np.ndarray) -> bytes:
    """9 u32 [magic, H, W, C, patch, levels, K, keyframeInterval, textVocabSize] + f32 INTRA then INTER
    codebooks, each [levels, K, patch^2 C]; no version or checksum (the format has none)."""
    h = header
    head = struct.pack("<9I", VRQ0, h["height"], h["width"], h["channels"], h["patch"], h["levels"], h["K"],
                       h["keyframeInterval"], h["textVocabSize"])
    return head + np.asarray(intra, "<f4").tobytes() + np.asarray(inter, "<f4").tobytes()


# -- MBJS: builderforce's HybridMambaModel weights -------------------------------------------------------
MBJS = 0x4D424A53
MBJS_LAYER_TYPES = ("mamba1", "mamba2", "mamba3", "attention")  # the u8 codes 0..3
MBJS_MAX_LAYERS = 1 << 16
MBJS_MAX_PARAMS = 1 << 20


def to_f16_truncating(a: np.ndarray) -> np.ndarray:
    """float32 -> float16 bits as builderforce's floatToFp16: the mantissa truncated (not rounded),
    exponents past f16's range -> inf, below 2^-24 -> signed zero, NaN -> 0x7E00 | sign. uint16."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.int64)
    sign = (bits >> 31) << 15
    exp = (bits >> 23) & 0xFF
    mant = bits & 0x7FFFFF
    e = exp - 112
    sub = np.where(e < -10, 0, (mant | 0x800000) >> np.clip(14 - e, 0, 63))
    out = np.where(e >= 31, 0x7C00, np.where(e <= 0, sub, (e << 10) | (mant >> 13)))
    out = np.where(exp == 255, 0x7C00 | np.where(mant != 0, 0x200, 0), out)
    return (sign | out).astype(np.uint16)


def build_mbjs(layer_types, arrays, fp16: bool = False) -> bytes:
    """MBJS v2 (f32) or v3 (f16, builderforce's truncating conversion): u32 magic 0x4D424A53, u32 version,
    u32 nLayers, u8 layer type per layer (0 mamba1, 1 mamba2, 2 mamba3, 3 attention) zero-padded to a
    multiple of 4 bytes, u32 nParams, u32 numel per parameter, the parameters flat in order, then the
    CRC-32 trailer [0x52435645][crc32 of everything before it]."""
    codes = []
    for t in layer_types:
        if t not in MBJS_LAYER_TYPES:
            raise FormatError(f"MBJS: unknown layer type {t!r}")
        codes.append(MBJS_LAYER_TYPES.index(t))
    pad = -(-len(codes) // 4) * 4
    arrays = [np.asarray(a, np.float32).ravel() for a in arrays]
    head = struct.pack("<3I", MBJS, 3 if fp16 else 2, len(codes)) + bytes(codes) + bytes(pad - len(codes))
    head += struct.pack(f"<I{len(arrays)}I", len(arrays), *(a.size for a in arrays))
    data = b"".join((to_f16_truncating(a).astype("<u2") if fp16 else a.astype("<f4")).tobytes() for a in arrays)
    body = head + data
    return body + struct.pack("<II", CRC_MAGIC, crc32(body))


def parse_mbjs(buf: bytes) -> dict:
    """{'version', 'fp16', 'layer_types' (None for legacy v1, which builderforce reads as all mamba1),
    'numels', 'arrays' (f32), 'crc' (whether a trailer was present)}. The blob must be exactly the
    size its header implies, plus the 8-byte CRC trailer when there is one (checked first)."""
    buf = bytes(buf)
    magic, ver = _u32s(buf, 0, 2, "MBJS")
    # The trailer first, as builderforce's loader does: a corrupt byte anywhere is an IntegrityError.
    crc = len(buf) >= 20 and struct.unpack_from("<I", buf, len(buf) - 8)[0] == CRC_MAGIC
    if crc:
        if struct.unpack_from("<I", buf, len(buf) - 4)[0] != crc32(buf[:-8]):
            raise IntegrityError("MBJS failed CRC integrity check (corrupt or truncated)")
        buf = buf[:-8]
    if magic != MBJS:
        raise FormatError("bad magic number (not an MBJS weight file)")
    if ver not in (1, 2, 3):
        raise FormatError(f"unsupported MBJS version {ver} (expected 1, 2 or 3)")
    off, types = 8, None
    if ver != 1:
        (n_layers,) = _u32s(buf, off, 1, "MBJS")
        if n_layers > MBJS_MAX_LAYERS:
            raise LimitError(f"MBJS claims {n_layers} layers")
        off += 4
        pad = -(-n_layers // 4) * 4
        if off + pad > len(buf):
            raise TruncatedError("MBJS: layer-type table runs past the blob")
        codes = buf[off:off + n_layers]
        bad = [c for c in codes if c >= len(MBJS_LAYER_TYPES)]
        if bad:
            raise FormatError(f"MBJS: unknown layer type code {bad[0]}")
        types = [MBJS_LAYER_TYPES[c] for c in codes]
        off += pad
    (n_params,) = _u32s(buf, off, 1, "MBJS")
    if n_params > MBJS_MAX_PARAMS or 4 * n_params > len(buf):
        raise LimitError(f"MBJS claims {n_params} parameters in {len(buf)} bytes")
    numels = list(_u32s(buf, off + 4, n_params, "MBJS numel table"))
    off += 4 + 4 * n_params
    fp16 = ver == 3
    end = off + sum(numels) * (2 if fp16 else 4)
    if len(buf) != end:
        raise (TruncatedError if len(buf) < end else FormatError)(
            f"MBJS: {len(buf)} bytes before the trailer, header implies {end}")
    arrays = []
    for n in numels:
        if fp16:
            arrays.append(np.frombuffer(buf, "<u2", n, off).view(np.float16).astype(np.float32))
            off += 2 * n
        else:
            arrays.append(np.frombuffer(buf, "<f4", n, off).astype(np.float32))
            off += 4 * n
    return {"version": ver, "fp16": fp16, "layer_types": types, "numels": numels, "arrays": arrays, "crc": crc}
