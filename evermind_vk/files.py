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
    return EvermindPackage.from_file(path).load_model(device)


# -- HybridMambaModel (issue 12) ------------------------------------------------------------------------
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


register_model_type(ModelType(
    HYBRID_MAMBA, "EVT0", _config_errors(HybridMambaConfig), model_class=HybridMambaModel,
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
