"""The model protocol: what `evermind_vk.train.Trainer` needs of a model, and nothing more.

Every model type (TransformerLM, EvermindLM, SharedExpertMoE, HybridMambaModel, ConvAE) implements it:

  config                      a frozen dataclass with to_dict() and from_dict()
  device                      the Vulkan device holding the weights
  parameters()                name -> device tensor: what an optimizer updates
  num_parameters()            the count of weights
  state_dict() / load_state_dict(sd)
  wsla_parameters()           the narrow set WSLA (write-through adaptation) trains
  data_kind                   what one training example is: "tokens" (a token stream cut into next-token
                              chunks), "images" ([N, C, H, W] rows) or "pairs" ((input, target) vector rows)
  eval_metric                 what Trainer.evaluate returns: "perplexity" (exp of the mean loss) or "mse"/"loss"
  precisions                  the precisions its ops support ("f32"; TransformerLM also "f16")
  batch_inputs(batch, seq_len)  name -> (shape, dtype) of the device inputs of one batch
  batch_loss(inputs, batch, seq_len, dtype, grad_scale, **options)
                              (loss, extras): the batch's mean loss (a 1-element f32 tensor, differentiable)
                              and named 1-element tensors reported beside it (e.g. the MoE load-balance loss).
                              grad_scale is the weight of this batch's gradient in its optimizer step, for
                              gradient terms a model adds outside its loss (the MoE's auxiliary router term)
  generation_state()          the incremental-decoding state (a KV cache, the recurrent state) or None
  records_grad_scale          (optional, default False) True when batch_loss uses grad_scale: the Trainer
                              then records one program per distinct batch weight

The mixins below give the common implementations; `model_type` / `build_model` map a model to the name
stored in checkpoints and back.
"""
from __future__ import annotations

from dataclasses import fields
from typing import Protocol, runtime_checkable

from ..errors import ConfigError

DATA_KINDS = ("tokens", "images", "pairs")


@runtime_checkable
class TrainableModel(Protocol):
    """The structural type the Trainer accepts (see the module docstring for each member)."""

    config: object
    device: object
    data_kind: str
    eval_metric: str
    precisions: tuple

    def parameters(self) -> dict:
        """Name -> device tensor: what an optimizer updates."""

    def num_parameters(self) -> int:
        """The count of weights."""

    def state_dict(self) -> dict:
        """Name -> host array of every weight."""

    def load_state_dict(self, sd: dict) -> None:
        """Copy state_dict()'s arrays into the weights (checked)."""

    def wsla_parameters(self) -> list:
        """The narrow set WSLA trains."""

    def batch_inputs(self, batch: int, seq_len: int) -> dict:
        """Name -> (shape, dtype) of one batch's device inputs."""

    def batch_loss(self, inputs: dict, batch: int, seq_len: int, dtype: str = "f32", grad_scale: float = 1.0,
                   **options) -> tuple:
        """(the batch's mean loss, named extras)."""

    def generation_state(self):
        """The incremental-decoding state, or None."""


class NextTokenModel:
    """The protocol for a causal LM trained on next-token chunks: ids and targets, u32 [batch * seq_len]
    (targets >= the vocabulary are padding, ignored by the loss); the loss is `self.loss(ids, targets,
    batch)`, the mean next-token cross-entropy; evaluation reports perplexity."""

    data_kind = "tokens"
    eval_metric = "perplexity"
    precisions = ("f32",)
    loss_options: tuple = ()  # names of the keyword options batch_loss accepts

    def batch_inputs(self, batch: int, seq_len: int) -> dict:
        """ids and targets of `batch` sequences of `seq_len` tokens, packed."""
        n = batch * seq_len
        return {"ids": ((n,), "u32"), "targets": ((n,), "u32")}

    def batch_loss(self, inputs: dict, batch: int, seq_len: int, dtype: str = "f32", grad_scale: float = 1.0,
                   **options) -> tuple:
        """(mean next-token cross-entropy, no extras)."""
        check_options(self, options)
        if dtype != "f32":
            return self.loss(inputs["ids"], inputs["targets"], batch, dtype=dtype), {}
        return self.loss(inputs["ids"], inputs["targets"], batch), {}

    def generation_state(self):
        """None: generation re-runs the context (models with a cache or a recurrent state override this)."""
        return None


def check_options(model, options: dict) -> None:
    """Refuse loss options the model does not take (a typo must not be ignored silently)."""
    unknown = set(options) - set(getattr(model, "loss_options", ()))
    if unknown:
        raise ConfigError(f"{type(model).__name__} takes no loss option {sorted(unknown)} "
                          f"(it takes: {', '.join(model.loss_options) or 'none'})")


def config_from_dict(cls, d: dict):
    """A config dataclass from its to_dict() output; ConfigError names missing or unknown fields."""
    if not isinstance(d, dict):
        raise ConfigError(f"config must be an object, got {type(d).__name__}")
    known = {f.name for f in fields(cls)}
    if set(d) - known:
        raise ConfigError(f"{cls.__name__}: unknown fields {sorted(set(d) - known)}")
    try:
        return cls(**d)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{cls.__name__}: {e}") from e
