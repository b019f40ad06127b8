"""Model files: where models meet file formats (the one module that imports both).

  save_model / load_model      weights + config as .npz (no pickle)
  export_safetensors / import_safetensors
  load(path)                   any model file we read: .evermind, .safetensors or .npz
and the registration of each of our model types with the .evermind container (its layout, config
check, pack and unpack)."""
from __future__ import annotations

from io import BytesIO
import json

import numpy as np

from .errors import FormatError, UnsupportedError
from .io.atomic import atomic_write
from .io.layouts import build_evt0
from .io.package import EvermindPackage, ModelType, register_model_type
from .io.safetensors import load_safetensors, save_safetensors
from .models import LMConfig, TransformerLM

TRANSFORMER_LM = "evermind-transformer-lm"  # our TransformerLM in packages, checkpoint layout EVT0


def _config_errors(cls):
    def errors(cfg: dict) -> list:
        try:
            cls.from_dict(cfg)
        except ValueError as e:
            return [f"invalid config: {e}"]
        return []
    return errors


def _unpack_lm(config: dict, params: dict, device=None) -> TransformerLM:
    model = TransformerLM(LMConfig.from_dict(config), device=device)
    model.load_state_dict(params)
    return model


register_model_type(ModelType(
    TRANSFORMER_LM, "EVT0", _config_errors(LMConfig), model_class=TransformerLM,
    pack=lambda m, fp16: (m.config.to_dict(), build_evt0(m.state_dict(), fp16), m.num_parameters()),
    unpack=_unpack_lm))


# -- .npz ---------------------------------------------------------------------------------------------
def save_model(model: TransformerLM, path: str) -> None:
    """Weights + config as an .npz (no pickle), written atomically."""
    arrays = model.state_dict()
    arrays["__config__"] = np.frombuffer(json.dumps(model.config.to_dict(), sort_keys=True).encode(), np.uint8)
    buf = BytesIO()
    np.savez(buf, **arrays)
    atomic_write(path, buf.getvalue())


def load_model(path: str, device=None) -> TransformerLM:
    """Load save_model's file (validated: config fields, every weight's presence, shape and dtype)."""
    with np.load(path, allow_pickle=False) as z:
        if "__config__" not in z:
            raise UnsupportedError(f"{path}: not an evermind-vk model file (no __config__)")
        try:
            cfg = LMConfig.from_dict(json.loads(bytes(z["__config__"]).decode()))
        except ValueError as e:
            raise UnsupportedError(f"{path}: {e}") from e
        model = TransformerLM(cfg, device=device)
        model.load_state_dict({k: z[k] for k in z.files if k != "__config__"})
    return model


# -- safetensors --------------------------------------------------------------------------------------
def export_safetensors(model: TransformerLM, path: str) -> None:
    """Model weights as safetensors (the config goes into its string metadata)."""
    save_safetensors(path, model.state_dict(), {"evermind_config": json.dumps(model.config.to_dict())})


def import_safetensors(path: str, device=None) -> TransformerLM:
    """A TransformerLM from export_safetensors' file."""
    tensors, meta = load_safetensors(path)
    try:
        cfg = LMConfig.from_dict(json.loads(meta["evermind_config"]))
    except (KeyError, ValueError) as e:
        raise FormatError(f"{path}: missing or invalid evermind_config metadata: {e}") from e
    model = TransformerLM(cfg, device=device)
    model.load_state_dict(tensors)
    return model


def load(path: str, device=None):
    """The model in a file: an .evermind package (validated), a .safetensors or an .npz we wrote."""
    if str(path).endswith(".safetensors"):
        return import_safetensors(path, device)
    if str(path).endswith(".npz"):
        return load_model(path, device)
    pkg = EvermindPackage.from_file(path)
    if pkg.manifest.get("modality", "text") in ("video", "image"):
        return load_media_lm(pkg, device)  # (EvermindLM, VideoRVQCodec)
    return pkg.load_model(device)


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
                  card: dict | None = None, fp16: bool = False, created_at: str | None = None) -> EvermindPackage:
    """builderforce's EvermindModelPackage.fromMediaLM: the LM's EVL0 and the codec's VRQ0 in one package."""
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


def load_media_lm(pkg: EvermindPackage, device=None):
    """(EvermindLM, VideoRVQCodec) of a validated video/image package (builderforce's loadMediaLM)."""
    modality = pkg.manifest.get("modality", "text")
    if modality not in ("video", "image"):
        raise FormatError(f"loadMediaLM: package modality is '{modality}', use load_model()")
    lm = pkg.load_model(device)  # validates, codec checksum included
    return lm, deserialize_codec(pkg.codec)
