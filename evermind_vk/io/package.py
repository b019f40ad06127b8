""".evermind model packages: builderforce's EVM1 container, byte-compatible.

EVM1 (little-endian): u32 magic 0x45564d31, u32 version (1; checked, which builderforce's reader
skips), u32 manifest length, compact JSON manifest, checkpoint bytes, optional codec bytes (only when
the manifest has checkpointBytes). On disk we wrap the blob in one zstd frame; unframed builderforce
blobs are read too. Checksums are FNV-1a-32 over the checkpoint (and codec) bytes.

The container knows layouts (evermind_vk.io.layouts), not models: each model type is registered
with `register_model_type` (evermind_vk.files registers ours), saying its checkpoint layout, how to
check its config and its tensors, and how to turn a model into checkpoint bytes and back.

Hostile packages: the frame is read in steps under a size and ratio cap (framing.allowed_size, from
`max_size` / `max_ratio`), layouts check every count against the bytes present before building
anything, `validate()` checks the tensors against what the model type expects (`check_params`) and
reports NaN/Inf weights, and `load_model` validates and parses once, refusing non-finite weights unless
`allow_nonfinite=True`, so a tiny file declaring a huge model fails before any model is allocated.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable

import fnv_hash_fast

from ..errors import BlobError, FormatError, LimitError, TruncatedError, UnsupportedError
from . import framing
from .atomic import atomic_write
from .jsjson import js_json, loads
from .layouts import nonfinite_count, parse_evl0, parse_evt0, parse_moe0, refuse_nonfinite, to_f16
from .regular import open_regular

PKG_MAGIC, PKG_VERSION = 0x45564D31, 1
SCHEMA = "evermind.model/1"
MAX_PACKAGE = 1 << 34
MAX_MANIFEST = 1 << 20
MANIFEST_ORDER = ("schema", "name", "version", "modelType", "modality", "config", "paramCount", "checkpointFormat",
                  "checkpointFp16", "checkpointBytes", "checksum", "codecFormat", "codecChecksum", "card", "createdAt")


def fnv1a32(data) -> int:
    """FNV-1a-32 of bytes (the package checksum). FNV-1a is one multiply per byte, each depending on the
    previous, so numpy cannot vectorise it; the maintained `fnv-hash-fast` package's C loop does it
    (~0.6-1 GB/s; the pure-Python loop ran at 8 MB/s). FNV_BACKEND says which implementation runs."""
    return fnv_hash_fast.fnv1a_32(data if isinstance(data, bytes) else bytes(data))


# fnv-hash-fast falls back to a pure-Python loop if its C extension is missing; say so rather than hide it
FNV_BACKEND = "c" if type(fnv_hash_fast.fnv1a_32).__name__ == "builtin_function_or_method" else "python"


# -- model types --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelType:
    """How a package's modelType maps to a checkpoint layout and, where registered, to a model.

    config_errors(config) lists what is wrong with a manifest config; check_params(config, named
    arrays) lists where the checkpoint's tensors differ from what the config implies (names, shapes,
    dtypes; called only with a valid config, and must not allocate by the config's claims before
    comparing counts); pack(model, fp16) returns (config dict, checkpoint bytes, parameter count);
    unpack(config, named f32 arrays, device) returns the model. model_class: the Python class whose
    instances `EvermindPackage.from_model` packs. modality: None for text models (and builderforce's
    media LMs, whose video/image packages carry a codec section), else the one modality the type's
    packages have, the model itself taking that data (no codec section)."""
    name: str
    checkpoint_format: str
    config_errors: Callable[[dict], list]
    model_class: type | None = None
    pack: Callable | None = None
    unpack: Callable | None = None
    check_params: Callable[[dict, dict], list] | None = None
    modality: str | None = None


MODEL_TYPES: dict[str, ModelType] = {}


def register_model_type(mt: ModelType) -> None:
    """Register a model type's package handling under its name (replacing one of the same name)."""
    MODEL_TYPES[mt.name] = mt


def _int_fields(*names):
    def errors(cfg: dict) -> list:
        errs = []
        for k in names:  # builderforce lets missing or NaN fields pass; they are errors here
            v = cfg.get(k)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                errs.append(f"invalid config: {k} = {v!r}")
        if not errs and not 1 <= cfg["topK"] <= cfg["numExperts"]:
            errs.append(f"invalid config: topK {cfg['topK']} outside 1..{cfg['numExperts']}")
        return errs
    return errors


# builderforce's own types: their layouts define the config fields.
register_model_type(ModelType("shared-expert-moe", "MoE0", _int_fields("modelDim", "hiddenDim", "numExperts", "topK")))
register_model_type(ModelType("evermind-lm", "EVL0", _int_fields("vocabSize", "dModel", "numLayers", "convKernel",
                                                                 "hiddenDim", "numExperts", "topK")))


# -- the package ------------------------------------------------------------------------------------
class EvermindPackage:
    """A builderforce .evermind package: the manifest, the checkpoint bytes (its format named by the
    manifest) and an optional codec; built from a model, read from a file or blob, written atomically."""

    def __init__(self, manifest: dict, checkpoint: bytes, codec: bytes | None = None, version: int = PKG_VERSION):
        self.manifest, self.checkpoint, self.codec, self.version = manifest, bytes(checkpoint), codec, version

    # building
    @staticmethod
    def make_manifest(**fields) -> dict:
        """A manifest dict of the given fields in builderforce's key order, None values left out."""
        return {k: fields[k] for k in MANIFEST_ORDER if k in fields and fields[k] is not None}

    @classmethod
    def from_model(cls, model, name: str, version: str = "1.0.0", fp16: bool = False, card: dict | None = None,
                   created_at: str | None = None, allow_nonfinite: bool = False) -> "EvermindPackage":
        """Pack a model of a registered type (its checkpoint layout, f32 or f16 round-to-nearest-even).
        NaN/Inf weights (or weights that overflow f16) are refused (NonFiniteError) unless allow_nonfinite."""
        mt = next((t for t in MODEL_TYPES.values() if t.model_class is not None and isinstance(model, t.model_class)),
                  None)
        if mt is None or mt.pack is None:
            raise UnsupportedError(f"no package model type is registered for {type(model).__name__}")
        state = model.state_dict()
        refuse_nonfinite({k: state[k] for k in sorted(state)}, f"package {name!r}", allow_nonfinite, verb="save")
        if fp16 and not allow_nonfinite:
            refuse_nonfinite({k: to_f16(state[k]) for k in sorted(state)}, f"package {name!r} (as f16)",
                             allow_nonfinite, verb="save")
        config, cp, n_params = mt.pack(model, fp16)
        manifest = cls.make_manifest(
            schema=SCHEMA, name=name, version=version, modelType=mt.name, modality=mt.modality, config=config,
            paramCount=n_params,
            checkpointFormat=mt.checkpoint_format, checkpointFp16=fp16, checksum=fnv1a32(cp),
            card=card or {"description": f"{name}: an evermind-vk {type(model).__name__}"}, createdAt=created_at)
        return cls(manifest, cp)

    def to_blob(self) -> bytes:
        """The package as bytes (header, manifest JSON as builderforce writes it, checkpoint, codec)."""
        m = js_json(self.manifest).encode("utf-8")
        return struct.pack("<3I", PKG_MAGIC, self.version, len(m)) + m + self.checkpoint + (self.codec or b"")

    def to_file(self, path: str) -> None:
        """Write the package (framed) to path atomically."""
        atomic_write(path, framing.frame(self.to_blob()))

    # parsing
    @classmethod
    def from_blob(cls, blob) -> "EvermindPackage":
        """Parse a package from bytes (framed or not); every section is bounded by the bytes present
        (TruncatedError, FormatError)."""
        blob = memoryview(blob).cast("B")  # slices below are views; only the sections are copied
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
        manifest = loads(blob[12:12 + mlen], "manifest")
        if not isinstance(manifest, dict):
            raise FormatError("manifest is not a JSON object")
        start = 12 + mlen
        cp_bytes = manifest.get("checkpointBytes")
        if cp_bytes is not None:
            if not isinstance(cp_bytes, int) or isinstance(cp_bytes, bool) or cp_bytes < 0:
                raise FormatError(f"checkpointBytes {cp_bytes!r} is not a byte count")
            if start + cp_bytes > len(blob):
                raise TruncatedError("truncated (checkpointBytes exceeds blob)")
            codec = blob[start + cp_bytes:]
            return cls(manifest, blob[start:start + cp_bytes], bytes(codec) if len(codec) else None, version)
        return cls(manifest, blob[start:], None, version)

    @classmethod
    def from_file(cls, path: str, max_size: int = MAX_PACKAGE,
                  max_ratio: float = framing.DEFAULT_MAX_RATIO) -> "EvermindPackage":
        """Read a package file (framed or builderforce's raw blob); the frame may decompress to at most
        framing.allowed_size(file size, max_size, max_ratio) bytes."""
        with open_regular(path, ".evermind package", max_size) as rf:
            if framing.is_framed(rf.read_at(0, 4)):
                return cls.from_blob(framing.unframe_at(rf.read_at, rf.size, max_size, max_ratio))
            return cls.from_blob(rf.read_all())

    # validation
    def validate(self) -> dict:
        """{"ok": bool, "errors": [...]}: every problem, not just the first (tensors that do not match
        the config, NaN/Inf weights included)."""
        errors, nonfinite, _ = self._check()
        errors = errors + nonfinite
        return {"ok": not errors, "errors": errors}

    def _check(self):
        """(errors, non-finite weight errors, parsed params or None): one parse of the checkpoint."""
        m, errors = self.manifest, []
        if m.get("schema") != SCHEMA:
            errors.append(f"unknown schema: {m.get('schema')}")
        mt = m.get("modelType")
        if mt not in MODEL_TYPES:
            errors.append(f"unsupported modelType: {mt}")
        elif m.get("checkpointFormat") != MODEL_TYPES[mt].checkpoint_format:
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
        cfg = m.get("config")
        if not isinstance(cfg, dict):
            errors.append("invalid config: not an object")
        elif mt in MODEL_TYPES:
            errors += MODEL_TYPES[mt].config_errors(cfg)
        actual = fnv1a32(self.checkpoint)
        if m.get("checksum") != actual:
            errors.append(f"checksum mismatch (manifest {m.get('checksum')}, actual {actual}) — corrupt or tampered checkpoint")
        modality = m.get("modality", "text")
        native = MODEL_TYPES[mt].modality if mt in MODEL_TYPES else None
        if modality not in ("text", "video", "image"):
            errors.append(f"unknown modality: {modality}")
        if native is not None:  # a model of images (or video) itself: no codec section
            if modality != native:
                errors.append(f"modality {modality!r}: {mt} packages have modality {native!r}")
            if self.codec is not None:
                errors.append(f"{mt} package carries an unexpected codec section")
        elif modality in ("video", "image"):
            if self.codec is None:
                errors.append(f"modality '{modality}' package is missing its codec section")
            elif m.get("codecChecksum") != fnv1a32(self.codec):
                errors.append(f"codec checksum mismatch (manifest {m.get('codecChecksum')}, actual {fnv1a32(self.codec)}) — corrupt codec")
        elif self.codec is not None:
            errors.append("text package carries an unexpected codec section")
        params, nonfinite = None, []
        if not errors:
            try:
                params = self.parse_checkpoint()
            except BlobError as e:
                errors.append(f"checkpoint: {e}")
        if params is not None:
            check = MODEL_TYPES[mt].check_params
            if check is not None:
                errors += [f"checkpoint: {e}" for e in check(cfg, params)]
            for name, a in params.items():
                bad = nonfinite_count(a)
                if bad:
                    nonfinite.append(f"checkpoint: tensor {name!r} has {bad} NaN/Inf values")
        return errors, nonfinite, params

    def parse_checkpoint(self):
        """The checkpoint's named arrays, parsed in the format the manifest names (EVT0, EVL0, MoE0, ...)."""
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

    def load_model(self, device=None, allow_nonfinite: bool = False):
        """The model in this package, validated first (the checkpoint is parsed once, and checked against
        the config before any model is built). NaN/Inf weights are refused unless allow_nonfinite."""
        errors, nonfinite, params = self._check()
        if errors:
            raise FormatError("invalid package: " + "; ".join(errors + nonfinite))
        if nonfinite:  # NonFiniteError naming each tensor and its count, unless allowed
            refuse_nonfinite({k: params[k] for k in sorted(params)}, "package", allow_nonfinite)
        mt = MODEL_TYPES[self.manifest["modelType"]]
        if mt.unpack is None:
            raise UnsupportedError(f"package model type '{mt.name}' cannot be loaded into a model yet")
        return mt.unpack(self.manifest["config"], params, device)
