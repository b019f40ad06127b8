"""The io layer, beside the others: file formats, never models. zstd framing, the one atomic write,
JavaScript-identical JSON, doppler's checkpoint store, builderforce's .evermind container and its
checkpoint layouts, safetensors, token lists; `open_blob(path)` decodes any package or checkpoint file once.
The shared rules for hostile input live here, one home each: `regular.open_regular` (user paths must be
regular files; reads bounded by the size at open), `jsjson.loads` (JSON structure bounded before parsing),
`layouts.refuse_nonfinite` (NaN/Inf weights refused on save and load). docs/hostile-input.md says more."""
from .anyfile import Decoded, open_blob
from .atomic import atomic_write
from .checkpoint import load_checkpoint, save_checkpoint
from .package import EvermindPackage, ModelType, register_model_type

__all__ = ["atomic_write", "save_checkpoint", "load_checkpoint", "EvermindPackage", "ModelType", "register_model_type",
           "open_blob", "Decoded"]
