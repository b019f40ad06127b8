"""Model files: where models meet file formats (the one module that imports both).

  save_model / load_model      weights + config as .npz (no pickle)
  export_safetensors / import_safetensors
  load(path)                   any model file we read: .evermind, .safetensors or .npz
and the registration of each of our model types with the .evermind container (its layout, config
check, tensor check, pack and unpack).

Every loader checks the file's tensors (names, shapes, dtypes, read from headers, not data) against
what the config implies *before* building the model, since TransformerLM(config) allocates host and
device memory for every weight: a 300-byte file whose config declares a billion parameters fails at
once. npz members are checked against their zip entries before reading (declared size against the
compressed bytes present, framing's ratio cap). Paths must be regular files (io.regular.open_regular).
NaN/Inf weights are refused, on load and on save (NonFiniteError naming each tensor and its count),
unless allow_nonfinite. A model the host cannot allocate is a CapacityError."""
from __future__ import annotations

from io import BytesIO
import json
import os
import struct
import tokenize
import zipfile
import zlib

import numpy as np

from .errors import BlobError, CapacityError, FormatError, LimitError, ShapeError, UnsupportedError
from .io import framing
from .io.atomic import atomic_write
from .io import jsjson
from .io.jsjson import loads_str
from .io.layouts import build_evt0, refuse_nonfinite
from .io.regular import open_regular, read_regular
from .io.package import EvermindPackage, ModelType, register_model_type
from .io.safetensors import load_safetensors, read_header, save_safetensors
from .models import LMConfig, TransformerLM
from .runtime import knobs

jsjson.set_limits_source(lambda: (knobs.get("EVERMIND_VK_JSON_MAX_DEPTH"), knobs.get("EVERMIND_VK_JSON_MAX_ELEMENTS"),
                                   knobs.get("EVERMIND_VK_JSON_MAX_STRING")))

TRANSFORMER_LM = "evermind-transformer-lm"  # our TransformerLM in packages, checkpoint layout EVT0
_INT_FIELDS = ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "max_seq_len")
MAX_CONFIG_BYTES = 1 << 20


def _lm_config(cfg) -> LMConfig:
    """LMConfig.from_dict, with integer fields required to be integers; ValueError names the problem."""
    if isinstance(cfg, dict):
        for k in _INT_FIELDS:
            v = cfg.get(k)
            if k in cfg and (not isinstance(v, int) or isinstance(v, bool)):
                raise ValueError(f"{k} = {v!r} is not an integer")
    try:
        return LMConfig.from_dict(cfg)
    except TypeError as e:
        raise ValueError(str(e)) from e


def _config_errors(cfg: dict) -> list:
    try:
        _lm_config(cfg)
    except ValueError as e:
        return [f"invalid config: {e}"]
    return []


def lm_param_shapes(cfg: LMConfig) -> dict[str, tuple]:
    """Name -> shape of every TransformerLM weight for cfg (what init_params builds, without building it;
    a test keeps the two equal). Call only after comparing lm_param_names_count with what a file holds."""
    d, hd, H, KVH, ff, V = cfg.d_model, cfg.head_dim, cfg.n_heads, cfg.n_kv_heads, cfg.d_ff, cfg.vocab_size
    out = {"embed.weight": (V, d)}
    for i in range(cfg.n_layers):
        L = f"layers.{i}."
        out.update({L + "attn_norm.weight": (d,), L + "attn.wq": (H * hd, d), L + "attn.wk": (KVH * hd, d),
                    L + "attn.wv": (KVH * hd, d), L + "attn.wo": (d, H * hd), L + "mlp_norm.weight": (d,),
                    L + "mlp.w_gate_up": (2 * ff, d), L + "mlp.w_down": (d, ff)})
    out["norm.weight"] = (d,)
    if not cfg.tie_embeddings:
        out["head.weight"] = (V, d)
    return out


def lm_param_names_count(cfg: LMConfig) -> int:
    return 2 + 8 * cfg.n_layers + (0 if cfg.tie_embeddings else 1)


def lm_spec_errors(cfg: LMConfig, spec: dict) -> list:
    """Where {name: (shape, dtype name)} differs from what cfg implies (no allocation by cfg's claims:
    the tensor count is compared first, and the file's tensors are bounded by its bytes)."""
    n = lm_param_names_count(cfg)
    if n != len(spec):
        return [f"config implies {n} tensors, the file holds {len(spec)}"]
    want = lm_param_shapes(cfg)
    errs = [f"missing tensor {k!r}" for k in sorted(set(want) - set(spec))]
    errs += [f"unexpected tensor {k!r}" for k in sorted(set(spec) - set(want))]
    for k in sorted(set(want) & set(spec)):
        shape, dtype = spec[k]
        if tuple(shape) != want[k]:
            errs.append(f"tensor {k!r} has shape {tuple(shape)}, the config implies {want[k]}")
        if dtype != "float32":
            errs.append(f"tensor {k!r} is {dtype}, model weights are float32")
    return errs[:20] + ([f"... and {len(errs) - 20} more"] if len(errs) > 20 else [])


def _check_lm_params(config: dict, params: dict) -> list:
    return lm_spec_errors(_lm_config(config), {k: (np.shape(a), np.asarray(a).dtype.name) for k, a in params.items()})


def _refuse_nonfinite(params: dict, where: str, allow_nonfinite: bool) -> None:
    refuse_nonfinite({k: params[k] for k in sorted(params)}, where, allow_nonfinite)


def _build(cfg: LMConfig, params: dict, device) -> TransformerLM:
    try:
        model = TransformerLM(cfg, device=device)
    except MemoryError as e:  # numpy's host allocation (a config larger than the host memory)
        raise CapacityError(f"a TransformerLM of {cfg.to_dict()} does not fit in host memory: {e}") from e
    model.load_state_dict(params)
    return model


def _unpack_lm(config: dict, params: dict, device=None) -> TransformerLM:
    return _build(_lm_config(config), params, device)


register_model_type(ModelType(
    TRANSFORMER_LM, "EVT0", _config_errors, model_class=TransformerLM,
    pack=lambda m, fp16: (m.config.to_dict(), build_evt0(m.state_dict(), fp16), m.num_parameters()),
    unpack=_unpack_lm, check_params=_check_lm_params))


# -- .npz ---------------------------------------------------------------------------------------------
def save_model(model: TransformerLM, path: str, allow_nonfinite: bool = False) -> None:
    """Weights + config as an .npz (no pickle), written atomically; NaN/Inf weights are refused
    (NonFiniteError, nothing written) unless allow_nonfinite."""
    arrays = model.state_dict()
    refuse_nonfinite(arrays, path, allow_nonfinite, verb="save")
    arrays["__config__"] = np.frombuffer(json.dumps(model.config.to_dict(), sort_keys=True).encode(), np.uint8)
    buf = BytesIO()
    np.savez(buf, **arrays)
    atomic_write(path, buf.getvalue())


# what zipfile and numpy raise on a mutated archive: a bad entry, an encrypted or unknown method, a corrupt
# deflate stream, a header whose offsets point outside the file (OSError EINVAL from a negative seek)
_ZIP_ERRORS = (zipfile.BadZipFile, RuntimeError, NotImplementedError, ValueError, EOFError, OSError, zlib.error,
               struct.error, KeyError, IndexError, OverflowError)


def _npy_header(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str):
    try:
        return _npy_header_of(zf, info, path)
    except _ZIP_ERRORS as e:  # bad entry, encrypted, unknown method, a corrupt deflate stream or header
        raise FormatError(f"{path}: member {info.filename!r} unreadable: {type(e).__name__}: {e}") from e


def _npy_header_of(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str):
    with zf.open(info) as f:
        try:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                return np.lib.format.read_array_header_1_0(f)
            if version == (2, 0):
                return np.lib.format.read_array_header_2_0(f)
        except (ValueError, EOFError, SyntaxError, tokenize.TokenError, TypeError) as e:  # numpy parses the header
            raise FormatError(f"{path}: member {info.filename!r} is not a .npy array: {e}") from e
    raise FormatError(f"{path}: member {info.filename!r}: .npy format {version} unsupported")


def _npy_read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> np.ndarray:
    try:
        with zf.open(info) as f:
            return np.lib.format.read_array(f, allow_pickle=False)
    except _ZIP_ERRORS + (SyntaxError, tokenize.TokenError, TypeError) as e:
        raise FormatError(f"{path}: member {info.filename!r} unreadable: {type(e).__name__}: {e}") from e


def load_model(path: str, device=None, allow_nonfinite: bool = False,
               max_ratio: float = framing.DEFAULT_MAX_RATIO) -> TransformerLM:
    """Load save_model's file. Checked before reading any weight: each member's declared size against its
    compressed bytes (framing.allowed_size), the config, and every tensor's name, shape and dtype (from the
    .npy headers) against the config; then the weights (NaN/Inf refused unless allow_nonfinite)."""
    with open_regular(path, "model file") as rf, os.fdopen(os.dup(rf.fd), "rb") as fh:
        return _load_npz(path, fh, device, allow_nonfinite, max_ratio)


def _load_npz(path, fh, device, allow_nonfinite, max_ratio):
    try:
        zf = zipfile.ZipFile(fh)
    except _ZIP_ERRORS as e:
        raise FormatError(f"{path}: not an .npz model file: {type(e).__name__}: {e}") from e
    with zf:
        infos = {}
        for info in zf.infolist():
            if not info.filename.endswith(".npy") or info.filename[:-4] in infos:
                raise FormatError(f"{path}: unexpected member {info.filename!r}")
            limit = framing.allowed_size(info.compress_size, max_ratio=max_ratio)
            if info.file_size > limit:
                raise LimitError(f"{path}: member {info.filename!r} declares {info.file_size} bytes from "
                                 f"{info.compress_size} compressed (more than {limit} believed): a zip bomb?")
            infos[info.filename[:-4]] = info
        cinfo = infos.pop("__config__", None)
        if cinfo is None:
            raise UnsupportedError(f"{path}: not an evermind-vk model file (no __config__)")
        if cinfo.file_size > MAX_CONFIG_BYTES:
            raise LimitError(f"{path}: __config__ of {cinfo.file_size} bytes")
        raw = _npy_read(zf, cinfo, path)
        try:
            cfg = _lm_config(loads_str(raw.tobytes().decode("utf-8", "surrogateescape"), f"{path}: __config__"))
        except BlobError:  # not JSON, or JSON past the structure limits: said as such
            raise
        except (ValueError, RecursionError) as e:
            raise UnsupportedError(f"{path}: {e}") from e
        spec = {}
        for k, info in infos.items():
            shape, _fortran, dtype = _npy_header(zf, info, path)
            spec[k] = (shape, dtype.name if dtype.byteorder in "=<|" or dtype.itemsize == 1 else f">{dtype.name}")
        errs = lm_spec_errors(cfg, spec)
        if errs:
            raise ShapeError(f"{path}: weights do not match the config: {'; '.join(errs)}")
        params = {k: _npy_read(zf, info, path) for k, info in infos.items()}
    _refuse_nonfinite(params, path, allow_nonfinite)
    return _build(cfg, params, device)


# -- safetensors --------------------------------------------------------------------------------------
def export_safetensors(model: TransformerLM, path: str, allow_nonfinite: bool = False) -> None:
    """Model weights as safetensors (the config goes into its string metadata); NaN/Inf weights are
    refused (NonFiniteError, nothing written) unless allow_nonfinite."""
    state = model.state_dict()
    refuse_nonfinite(state, path, allow_nonfinite, verb="save")
    save_safetensors(path, state, {"evermind_config": json.dumps(model.config.to_dict())})


def import_safetensors(path: str, device=None, allow_nonfinite: bool = False) -> TransformerLM:
    """A TransformerLM from export_safetensors' file (tensor names, shapes and dtypes checked against the
    config from the header before any weight is read or the model built)."""
    spec, meta = read_header(path)
    try:
        cfg = _lm_config(loads_str(meta["evermind_config"], f"{path}: evermind_config metadata"))
    except (KeyError, ValueError, RecursionError) as e:
        raise FormatError(f"{path}: missing or invalid evermind_config metadata: {e}") from e
    errs = lm_spec_errors(cfg, spec)
    if errs:
        raise ShapeError(f"{path}: weights do not match the config: {'; '.join(errs)}")
    tensors, _ = load_safetensors(path)
    _refuse_nonfinite(tensors, path, allow_nonfinite)
    return _build(cfg, tensors, device)


def load(path: str, device=None, allow_nonfinite: bool = False):
    """The model in a file: an .evermind package (validated), a .safetensors or an .npz we wrote."""
    if str(path).endswith(".safetensors"):
        return import_safetensors(path, device, allow_nonfinite)
    if str(path).endswith(".npz"):
        return load_model(path, device, allow_nonfinite)
    pkg = EvermindPackage.from_file(path)
    if pkg.manifest.get("modality", "text") in ("video", "image"):
        return load_media_lm(pkg, device, allow_nonfinite)  # (EvermindLM, VideoRVQCodec)
    return pkg.load_model(device, allow_nonfinite=allow_nonfinite)


# -- builderforce's model types: evermind-lm (EVL0) and shared-expert-moe (MoE0) ------------------------
from dataclasses import replace  # noqa: E402

from .io.layouts import build_evl0, build_moe0  # noqa: E402
from .io.package import MODEL_TYPES  # noqa: E402
from .models import EvermindLM, EvermindLMConfig, MoEConfig, SharedExpertMoE  # noqa: E402


def _register_builderforce_types() -> None:
    def pack_lm(m, fp16):
        cfg = m.config.to_builderforce()
        return cfg, build_evl0(cfg, m.state_dict(), fp16), m.num_parameters()

    def unpack_lm(config, params, device=None):
        model = EvermindLM(EvermindLMConfig.from_builderforce(config), device=device)
        model.load_state_dict(params)
        return model

    def pack_moe(m, fp16):
        cfg = m.config.to_builderforce()
        return cfg, build_moe0(cfg, m.state_dict(), fp16), m.num_parameters()

    def unpack_moe(config, params, device=None):
        model = SharedExpertMoE(MoEConfig.from_builderforce(config), device=device)
        model.load_state_dict(params)
        return model

    register_model_type(replace(MODEL_TYPES["evermind-lm"], model_class=EvermindLM, pack=pack_lm, unpack=unpack_lm))
    register_model_type(replace(MODEL_TYPES["shared-expert-moe"], model_class=SharedExpertMoE, pack=pack_moe,
                                unpack=unpack_moe))


_register_builderforce_types()


# -- media packages: EvermindLM + VideoRVQ codec (VRQ0 section) ------------------------------------------
from .io.layouts import build_vrq0, parse_vrq0  # noqa: E402
from .io.package import SCHEMA, fnv1a32  # noqa: E402
from .models.video_rvq import VideoRVQCodec  # noqa: E402


def serialize_codec(codec: VideoRVQCodec) -> bytes:
    """builderforce's VideoRVQCodec.serialize(): the VRQ0 bytes."""
    return build_vrq0(codec.header(), codec.banks[0], codec.banks[1])


def deserialize_codec(blob: bytes) -> VideoRVQCodec:
    """VideoRVQCodec.deserialize(), refusing short or long bodies (builderforce loads a short one partially)."""
    return VideoRVQCodec.from_parsed(parse_vrq0(bytes(blob)))


def from_media_lm(lm: EvermindLM, codec: VideoRVQCodec, name: str, version: str = "1.0.0", modality: str = "video",
                  card: dict | None = None, fp16: bool = False, created_at: str | None = None,
                  allow_nonfinite: bool = False) -> EvermindPackage:
    """builderforce's EvermindModelPackage.fromMediaLM: the LM's EVL0 and the codec's VRQ0 in one package
    (NaN/Inf weights or codebooks refused unless allow_nonfinite)."""
    refuse_nonfinite({"lm": lm.state_dict(), "codec": list(codec.banks)}, f"package {name!r}", allow_nonfinite,
                     verb="save")
    if modality not in ("video", "image"):
        raise FormatError(f"fromMediaLM: modality must be 'video' or 'image', got {modality!r}")
    if lm.config.vocab_size != codec.vocab_size:
        raise FormatError(f"fromMediaLM: LM vocabSize ({lm.config.vocab_size}) must equal codec.vocabSize "
                          f"({codec.vocab_size})")
    cfg = lm.config.to_builderforce()
    cp, cb = build_evl0(cfg, lm.state_dict(), fp16), serialize_codec(codec)
    manifest = EvermindPackage.make_manifest(
        schema=SCHEMA, name=name, version=version, modelType="evermind-lm", modality=modality, config=cfg,
        paramCount=lm.num_parameters(), checkpointFormat="EVL0", checkpointFp16=fp16, checkpointBytes=len(cp),
        checksum=fnv1a32(cp), codecFormat="VRQ0", codecChecksum=fnv1a32(cb),
        card=card or {"description": f"{name}: an evermind-vk media EvermindLM"}, createdAt=created_at)
    return EvermindPackage(manifest, cp, cb)


def load_codec(path: str) -> VideoRVQCodec:
    """A VRQ0 codec file (a regular file, read to exactly its size at open; parse_vrq0 checks the rest)."""
    return deserialize_codec(read_regular(path, "codec"))


def load_media_lm(pkg: EvermindPackage, device=None, allow_nonfinite: bool = False):
    """(EvermindLM, VideoRVQCodec) of a validated video/image package (builderforce's loadMediaLM)."""
    modality = pkg.manifest.get("modality", "text")
    if modality not in ("video", "image"):
        raise FormatError(f"loadMediaLM: package modality is '{modality}', use load_model()")
    lm = pkg.load_model(device, allow_nonfinite=allow_nonfinite)  # validates, codec checksum included
    return lm, deserialize_codec(pkg.codec)


# -- HybridMambaModel -------------------------------------------------------------------------------------
# In .evermind packages as modelType "evermind-hybrid-mamba": config = HybridMambaConfig.to_dict()
# (builderforce's field names; `layers` a list of layer-type strings), checkpoint layout EVT0 (named
# f32 or f16 tensors, CRC-32 trailer), so a package round-trips bit-exactly. builderforce's own weight
# file, MBJS, is export_mbjs / import_mbjs.
from .io.layouts import build_mbjs, parse_mbjs  # noqa: E402
from .models import HybridMambaConfig, HybridMambaModel  # noqa: E402

HYBRID_MAMBA = "evermind-hybrid-mamba"


def _unpack_mamba(config: dict, params: dict, device=None) -> HybridMambaModel:
    model = HybridMambaModel(HybridMambaConfig.from_dict(config), device=device)
    model.load_state_dict(params)
    return model


def _mamba_config_errors(cfg: dict) -> list:
    try:
        HybridMambaConfig.from_dict(cfg)
    except (TypeError, ValueError) as e:
        return [f"invalid config: {e}"]
    return []


register_model_type(ModelType(
    HYBRID_MAMBA, "EVT0", _mamba_config_errors, model_class=HybridMambaModel,
    pack=lambda m, fp16: (m.config.to_dict(), build_evt0(m.state_dict(), fp16), m.num_parameters()),
    unpack=_unpack_mamba))


def export_mbjs(model: HybridMambaModel, fp16: bool = False) -> bytes:
    """builderforce's MBJS v2 (f32) / v3 (f16, truncated as builderforce does) of the model's weights,
    parameters in builderforce's order, CRC-32 trailer."""
    return build_mbjs(model.layer_types(), [t.numpy() for t in model.params.values()], fp16)


def import_mbjs(model: HybridMambaModel, blob: bytes) -> HybridMambaModel:
    """Load an MBJS v1/v2/v3 weight file into model (v1: all layers mamba1). The layer types, the
    parameter count and every parameter's size must match the model (FormatError names the first
    difference)."""
    f = parse_mbjs(blob)
    types = f["layer_types"] if f["layer_types"] is not None else ["mamba1"] * model.config.numLayers
    if types != model.layer_types():
        raise FormatError(f"MBJS layer types {types} do not match the model's {model.layer_types()}")
    names = list(model.params)
    if len(f["arrays"]) != len(names):
        raise FormatError(f"MBJS has {len(f['arrays'])} parameters, the model {len(names)}")
    for i, (n, a) in enumerate(zip(names, f["arrays"])):
        if a.size != model.params[n].numel:
            raise FormatError(f"MBJS parameter {i} ({n!r}) size mismatch: file {a.size}, model {model.params[n].numel}")
    model.load_state_dict({n: a.reshape(model.params[n].shape) for n, a in zip(names, f["arrays"])})
    return model
