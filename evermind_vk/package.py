""".evermind model packages (builderforce's EVM1 layout, byte-compatible) and the checkpoint layouts
they carry: MoE0, EVL0 (with its CRC-32 trailer), VRQ0 codec headers, and our own EVT0 for
TransformerLM. Every parser treats its input as hostile: lengths are checked before slicing, bodies
must have exactly the size their header implies (the seed loaded short bodies partially), and each
failure raises a typed BlobError.

EVM1 (little-endian): u32 magic 0x45564d31, u32 version (1; checked — the seed never did), u32
manifest length, compact JSON manifest, checkpoint bytes, optional codec bytes (only when the
manifest has checkpointBytes). On disk we wrap the blob in one zstd frame; unframed builderforce
blobs are read too. Checksums are FNV-1a-32 over the checkpoint (and codec) bytes.
"""
from __future__ import annotations

import json
import math
import struct
import zlib

import numpy as np

from . import framing
from .errors import FormatError, IntegrityError, LimitError, TruncatedError, UnsupportedError
from .stablejson import js_number, js_string

PKG_MAGIC, PKG_VERSION = 0x45564D31, 1
MOE0, EVL0, VRQ0, EVT0, CRC_MAGIC = 0x4D6F4530, 0x45564C30, 0x56525130, 0x45565430, 0x52435645
SCHEMA = "evermind.model/1"
MAX_PACKAGE = 1 << 34
MAX_MANIFEST = 1 << 20
LM_TYPE = "evermind-transformer-lm"  # our TransformerLM, checkpoint format EVT0
MODEL_TYPES = {"shared-expert-moe": "MoE0", "evermind-lm": "EVL0", LM_TYPE: "EVT0"}
MANIFEST_ORDER = ("schema", "name", "version", "modelType", "modality", "config", "paramCount", "checkpointFormat",
                  "checkpointFp16", "checkpointBytes", "checksum", "codecFormat", "codecChecksum", "card", "createdAt")


# -- checksums and f16 ------------------------------------------------------------------------------
def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in bytes(data):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def crc32(data: bytes) -> int:
    """IEEE CRC-32 (poly 0xEDB88320, init and xorout ~0)."""
    return zlib.crc32(bytes(data)) & 0xFFFFFFFF


def to_f16(a: np.ndarray) -> np.ndarray:
    """float32 -> float16 with round-to-nearest-even (the seed truncated)."""
    return np.asarray(a, np.float32).astype(np.float16)


def js_json(value) -> str:
    """JSON.stringify(value) for plain data: insertion order, ECMAScript number and string format."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return js_number(value)
    if isinstance(value, str):
        return js_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(js_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(js_string(str(k)) + ":" + js_json(v) for k, v in value.items()) + "}"
    raise TypeError(f"cannot serialise {type(value).__name__}")


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
    shapes = _moe_shapes("", d, h, E)
    need = 24 + sum(math.prod(s) for _, s in shapes) * (2 if ver == 2 else 4)
    if need != len(buf):
        raise (TruncatedError if need > len(buf) else FormatError)(f"MoE0 body: {len(buf)} bytes, header implies {need}")
    off, params = 24, {}
    for name, shape in shapes:
        a, off = _floats(buf, off, math.prod(shape), ver == 2, "MoE0")
        params[name] = a.reshape(shape)
    return {"config": {"modelDim": d, "hiddenDim": h, "numExperts": E, "topK": k}, "params": params}


def _evl_shapes(V, d, L, K, h, E) -> list:
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
    shapes = _evl_shapes(V, d, L, K, h, E)
    body = 36 + sum(math.prod(s) for _, s in shapes) * (2 if ver == 2 else 4)
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
    for name, shape in shapes:
        a, off = _floats(buf, off, math.prod(shape), ver == 2, "EVL0")
        params[name] = a.reshape(shape)
    cfg = {"vocabSize": V, "dModel": d, "numLayers": L, "convKernel": K, "hiddenDim": h, "numExperts": E, "topK": k}
    return {"config": cfg, "params": params, "crc": crc}


def build_evl0(cfg: dict, params: dict, fp16: bool = False) -> bytes:
    shapes = _evl_shapes(cfg["vocabSize"], cfg["dModel"], cfg["numLayers"], cfg["convKernel"], cfg["hiddenDim"],
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


# -- the package ------------------------------------------------------------------------------------
class EvermindPackage:
    def __init__(self, manifest: dict, checkpoint: bytes, codec: bytes | None = None, version: int = PKG_VERSION):
        self.manifest, self.checkpoint, self.codec, self.version = manifest, bytes(checkpoint), codec, version

    # building
    @staticmethod
    def make_manifest(**fields) -> dict:
        return {k: fields[k] for k in MANIFEST_ORDER if k in fields and fields[k] is not None}

    @classmethod
    def from_model(cls, model, name: str, version: str = "1.0.0", fp16: bool = False, card: dict | None = None,
                   created_at: str | None = None) -> "EvermindPackage":
        cp = build_evt0(model.state_dict(), fp16)
        manifest = cls.make_manifest(
            schema=SCHEMA, name=name, version=version, modelType=LM_TYPE, config=model.config.to_dict(),
            paramCount=model.num_parameters(), checkpointFormat="EVT0", checkpointFp16=fp16, checksum=fnv1a32(cp),
            card=card or {"description": f"{name}: an evermind-vk TransformerLM"}, createdAt=created_at)
        return cls(manifest, cp)

    def to_blob(self) -> bytes:
        m = js_json(self.manifest).encode("utf-8")
        return struct.pack("<3I", PKG_MAGIC, self.version, len(m)) + m + self.checkpoint + (self.codec or b"")

    def to_file(self, path: str) -> None:
        from .checkpoint import atomic_write
        atomic_write(path, framing.frame(self.to_blob()))

    # parsing
    @classmethod
    def from_blob(cls, blob: bytes) -> "EvermindPackage":
        blob = bytes(blob)
        if len(blob) < 12:
            raise TruncatedError("truncated (no header)")
        magic, version, mlen = struct.unpack_from("<3I", blob, 0)
        if magic != PKG_MAGIC:
            raise FormatError("bad magic (not an .evermind package)")
        if version != PKG_VERSION:
            raise FormatError(f"package version {version} unsupported (this reader: {PKG_VERSION})")
        if mlen > MAX_MANIFEST:
            raise LimitError(f"manifest of {mlen} bytes exceeds {MAX_MANIFEST}")
        if 12 + mlen > len(blob):
            raise TruncatedError("truncated (manifest length exceeds blob)")
        try:
            manifest = json.loads(blob[12:12 + mlen].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise FormatError(f"manifest is not JSON: {e}") from e
        if not isinstance(manifest, dict):
            raise FormatError("manifest is not a JSON object")
        start = 12 + mlen
        cp_bytes = manifest.get("checkpointBytes")
        if cp_bytes is not None:
            if not isinstance(cp_bytes, int) or isinstance(cp_bytes, bool) or cp_bytes < 0:
                raise FormatError(f"checkpointBytes {cp_bytes!r} is not a byte count")
            if start + cp_bytes > len(blob):
                raise TruncatedError("truncated (checkpointBytes exceeds blob)")
            return cls(manifest, blob[start:start + cp_bytes], blob[start + cp_bytes:] or None, version)
        return cls(manifest, blob[start:], None, version)

    @classmethod
    def from_file(cls, path: str) -> "EvermindPackage":
        import os
        size = os.path.getsize(path)
        if size > MAX_PACKAGE:
            raise LimitError(f"{path}: {size} bytes exceeds {MAX_PACKAGE}")
        with open(path, "rb") as f:
            raw = f.read()
        return cls.from_blob(framing.unframe(raw, MAX_PACKAGE) if framing.is_framed(raw) else raw)

    # validation
    def validate(self) -> dict:
        """{"ok": bool, "errors": [...]}: every problem, not just the first."""
        m, errors = self.manifest, []
        if m.get("schema") != SCHEMA:
            errors.append(f"unknown schema: {m.get('schema')}")
        mt = m.get("modelType")
        if mt not in MODEL_TYPES:
            errors.append(f"unsupported modelType: {mt}")
        elif m.get("checkpointFormat") != MODEL_TYPES[mt]:
            errors.append(f"checkpointFormat {m.get('checkpointFormat')!r} does not match modelType {mt}")
        for key, kind in (("name", str), ("version", str), ("card", dict)):
            if not isinstance(m.get(key), kind):
                errors.append(f"missing or invalid field: {key}")
        for key in ("paramCount", "checksum"):
            v = m.get(key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                errors.append(f"missing or invalid field: {key}")
        if not isinstance(m.get("checkpointFp16"), bool):
            errors.append("missing or invalid field: checkpointFp16")
        errors += self._config_errors(mt, m.get("config"))
        actual = fnv1a32(self.checkpoint)
        if m.get("checksum") != actual:
            errors.append(f"checksum mismatch (manifest {m.get('checksum')}, actual {actual}) — corrupt or tampered checkpoint")
        modality = m.get("modality", "text")
        if modality not in ("text", "video", "image"):
            errors.append(f"unknown modality: {modality}")
        if modality in ("video", "image"):
            if self.codec is None:
                errors.append(f"modality '{modality}' package is missing its codec section")
            elif m.get("codecChecksum") != fnv1a32(self.codec):
                errors.append(f"codec checksum mismatch (manifest {m.get('codecChecksum')}, actual {fnv1a32(self.codec)}) — corrupt codec")
        elif self.codec is not None:
            errors.append("text package carries an unexpected codec section")
        if not errors:
            try:
                self.parse_checkpoint()
            except (FormatError, TruncatedError, IntegrityError, LimitError) as e:
                errors.append(f"checkpoint: {e}")
        return {"ok": not errors, "errors": errors}

    @staticmethod
    def _config_errors(mt, cfg) -> list:
        if not isinstance(cfg, dict):
            return ["invalid config: not an object"]
        need = {"shared-expert-moe": ("modelDim", "hiddenDim", "numExperts", "topK"),
                "evermind-lm": ("vocabSize", "dModel", "numLayers", "convKernel", "hiddenDim", "numExperts", "topK"),
                }.get(mt)
        if mt == LM_TYPE:
            from .models import LMConfig
            try:
                if set(cfg) != set(LMConfig.__dataclass_fields__):
                    raise ValueError(f"fields {sorted(cfg)}")
                LMConfig(**cfg)
            except (TypeError, ValueError) as e:
                return [f"invalid config: {e}"]
            return []
        if need is None:
            return []
        errs = []
        for k in need:  # the seed let missing or NaN fields pass; they are errors here
            v = cfg.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                errs.append(f"invalid config: {k} = {v!r}")
        if not errs and not 1 <= cfg["topK"] <= cfg["numExperts"]:
            errs.append(f"invalid config: topK {cfg['topK']} outside 1..{cfg['numExperts']}")
        return errs

    def parse_checkpoint(self):
        fmt = self.manifest.get("checkpointFormat")
        if fmt == "EVT0":
            return parse_evt0(self.checkpoint)[0]
        if fmt == "EVL0":
            out = parse_evl0(self.checkpoint, require_crc=False)
        elif fmt == "MoE0":
            out = parse_moe0(self.checkpoint)
        else:
            raise FormatError(f"unknown checkpointFormat {fmt!r}")
        if out["config"] != {k: self.manifest["config"].get(k) for k in out["config"]}:
            raise FormatError("config mismatch with checkpoint")
        return out["params"]

    def load_lm(self, device=None):
        """The TransformerLM in this package (validated first)."""
        v = self.validate()
        if not v["ok"]:
            raise FormatError("invalid package: " + "; ".join(v["errors"]))
        if self.manifest["modelType"] != LM_TYPE:
            raise UnsupportedError(f"package is '{self.manifest['modelType']}', load_lm reads {LM_TYPE}")
        from .models import LMConfig, TransformerLM
        model = TransformerLM(LMConfig(**self.manifest["config"]), device=device)
        model.load_state_dict(self.parse_checkpoint())
        return model


# -- safetensors --------------------------------------------------------------------------------
def export_safetensors(model, path: str) -> None:
    """Model weights as safetensors (the config goes into its string metadata)."""
    from safetensors.numpy import save
    from .checkpoint import atomic_write
    atomic_write(path, save(model.state_dict(), metadata={"evermind_config": json.dumps(model.config.to_dict())}))


def import_safetensors(path: str, device=None):
    """A TransformerLM from export_safetensors' file (the safetensors library validates the layout)."""
    from safetensors import safe_open
    from .models import LMConfig, TransformerLM
    try:
        with safe_open(path, framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # the library's own errors (SafetensorError, OSError) name the problem
        raise FormatError(f"{path}: not a readable safetensors file: {e}") from e
    try:
        cfg = LMConfig(**json.loads(meta["evermind_config"]))
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{path}: missing or invalid evermind_config metadata: {e}") from e
    model = TransformerLM(cfg, device=device)
    model.load_state_dict(tensors)
    return model
