"""The train layer: the Trainer (recorded steps, one submit each), AdamW and clipping, LR schedules,
data chunking, the byte tokenizer, generation and the loss plot."""
from .data import batches, build_chunks, default_corpus
from .generate import generate
from .optim import AdamW, ClipMetrics, GradScaler, clip_grad_norm
from .schedule import LRSchedule, lr_at
from .tokenizer import ByteTokenizer
from .trainer import Trainer

__all__ = ["Trainer", "AdamW", "ClipMetrics", "GradScaler", "clip_grad_norm", "LRSchedule", "lr_at", "ByteTokenizer", "generate",
           "build_chunks", "batches", "default_corpus"]

# Image models.
from .image import ImageTrainer, image_grid_png, shapes_dataset  # noqa: E402

__all__ += ["ImageTrainer", "image_grid_png", "shapes_dataset"]
# builderforce's trainers (EvermindLM, SharedExpertMoE).
from .bf_trainers import DynamicLossScaler, EvermindLMTrainer, MoETrainer  # noqa: E402

__all__ += ["DynamicLossScaler", "EvermindLMTrainer", "MoETrainer"]
