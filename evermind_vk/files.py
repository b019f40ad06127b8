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
