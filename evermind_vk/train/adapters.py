"""LoRA adapters alone, to and from safetensors (the adapter tensors by parameter name, and the LoRA
config as JSON in the file's metadata under "evermind_lora")."""
from __future__ import annotations

import json

from ..errors import FormatError
from ..io.jsjson import loads_str
from ..io.safetensors import load_safetensors, save_safetensors
from ..models.lora import LoRAConfig, add_lora, load_lora_state_dict, lora_state_dict


def save_lora(model, path: str) -> None:
    """Write the model's adapters (not its base weights) to a safetensors file."""
    if not getattr(model, "lora", None):
        raise FormatError("the model has no LoRA adapters to save")
    save_safetensors(path, lora_state_dict(model), {"evermind_lora": json.dumps(model.lora_config.to_dict())})


def load_lora(model, path: str) -> None:
    """Load adapters saved by save_lora into the model, attaching them first (from the file's config)
    if the model has none."""
    arrays, meta = load_safetensors(path)
    try:
        cfg = loads_str(meta["evermind_lora"], f"{path}: evermind_lora metadata")
        config = LoRAConfig(rank=cfg["rank"], alpha=cfg["alpha"], targets=tuple(cfg["targets"]), seed=cfg["seed"])
    except (KeyError, TypeError, ValueError) as e:
        raise FormatError(f"{path}: no valid evermind_lora metadata ({e})") from e
    if not getattr(model, "lora", None):
        add_lora(model, config)
    load_lora_state_dict(model, arrays)
