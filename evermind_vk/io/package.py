""".evermind model packages: builderforce's EVM1 container, byte-compatible.

EVM1 (little-endian): u32 magic 0x45564d31, u32 version (1; checked, which builderforce's reader
skips), u32 manifest length, compact JSON manifest, checkpoint bytes, optional codec bytes (only when
the manifest has checkpointBytes). On disk we wrap the blob in one zstd frame; unframed builderforce
blobs are read too. Checksums are FNV-1a-32 over the checkpoint (and codec) bytes.

The container knows layouts (evermind_vk.io.layouts), not models: each model type is registered
with `register_model_type` (evermind_vk.files registers ours), saying its checkpoint layout, how to
check its config, and how to turn a model into checkpoint bytes and back.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Callable

from ..errors import FormatError, IntegrityError, LimitError, TruncatedError, UnsupportedError
from . import framing
from .atomic import atomic_write
from .jsjson import js_json
from .layouts import parse_evl0, parse_evt0, parse_moe0

PKG_MAGIC, PKG_VERSION = 0x45564D31, 1
SCHEMA = "evermind.model/1"
MAX_PACKAGE = 1 << 34
MAX_MANIFEST = 1 << 20
MANIFEST_ORDER = ("schema", "name", "version", "modelType", "modality", "config", "paramCount", "checkpointFormat",
                  "checkpointFp16", "checkpointBytes", "checksum", "codecFormat", "codecChecksum", "card", "createdAt")


def fnv1a32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in bytes(data):
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


# -- model types --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ModelType:
    """How a package's modelType maps to a checkpoint layout and, where registered, to a model.

    config_errors(config) lists what is wrong with a manifest config; pack(model, fp16) returns
    (config dict, checkpoint bytes, parameter count); unpack(config, named f32 arrays, device) returns
    the model. model_class: the Python class whose instances `EvermindPackage.from_model` packs."""
    name: str
    checkpoint_format: str
    config_errors: Callable[[dict], list]
    model_class: type | None = None
    pack: Callable | None = None
    unpack: Callable | None = None


MODEL_TYPES: dict[str, ModelType] = {}


def register_model_type(mt: ModelType) -> None:
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
    def __init__(self, manifest: dict, checkpoint: bytes, codec: bytes | None = None, version: int = PKG_VERSION):
        self.manifest, self.checkpoint, self.codec, self.version = manifest, bytes(checkpoint), codec, version

    # building
    @staticmethod
    def make_manifest(**fields) -> dict:
        return {k: fields[k] for k in MANIFEST_ORDER if k in fields and fields[k] is not None}

    @classmethod
    def from_model(cls, model, name: str, version: str = "1.0.0", fp16: bool = False, card: dict | None = None,
                   created_at: str | None = None) -> "EvermindPackage":
        """Pack a model of a registered type (its checkpoint layout, f32 or f16 round-to-nearest-even)."""
        mt = next((t for t in MODEL_TYPES.values() if t.model_class is not None and isinstance(model, t.model_class)),
                  None)
        if mt is None or mt.pack is None:
            raise UnsupportedError(f"no package model type is registered for {type(model).__name__}")
        config, cp, n_params = mt.pack(model, fp16)
        manifest = cls.make_manifest(
            schema=SCHEMA, name=name, version=version, modelType=mt.name, config=config, paramCount=n_params,
            checkpointFormat=mt.checkpoint_format, checkpointFp16=fp16, checksum=fnv1a32(cp),
            card=card or {"description": f"{name}: an evermind-vk {type(model).__name__}"}, createdAt=created_at)
        return cls(manifest, cp)

    def to_blob(self) -> bytes:
        m = js_json(self.manifest).encode("utf-8")
        return struct.pack("<3I", PKG_MAGIC, self.version, len(m)) + m + self.checkpoint + (self.codec or b"")

    def to_file(self, path: str) -> None:
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

    def load_model(self, device=None):
        """The model in this package (validated first; its type must be registered with an unpacker)."""
        v = self.validate()
        if not v["ok"]:
            raise FormatError("invalid package: " + "; ".join(v["errors"]))
        mt = MODEL_TYPES[self.manifest["modelType"]]
        if mt.unpack is None:
            raise UnsupportedError(f"package model type '{mt.name}' cannot be loaded into a model yet")
        return mt.unpack(self.manifest["config"], self.parse_checkpoint(), device)
