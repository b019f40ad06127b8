"""The train layer: the Trainer (recorded steps, one submit each), AdamW and clipping, LR schedules,
data chunking, the byte tokenizer, generation and the loss plot; the image trainer; builderforce's
trainers (EvermindLM, SharedExpertMoE)."""
from .bf_trainers import DynamicLossScaler, EvermindLMTrainer, MoETrainer
from .data import batches, build_chunks, default_corpus
from .generate import generate
from .image import ImageTrainer, image_grid_png, shapes_dataset
from .optim import AdamW, ClipMetrics, GradScaler, clip_grad_norm
from .schedule import LRSchedule, lr_at
from .tokenizer import ByteTokenizer
from .trainer import Trainer

__all__ = ["Trainer", "AdamW", "ClipMetrics", "GradScaler", "clip_grad_norm", "LRSchedule", "lr_at", "ByteTokenizer", "generate",
           "build_chunks", "batches", "default_corpus",
           "ImageTrainer", "image_grid_png", "shapes_dataset",
           "DynamicLossScaler", "EvermindLMTrainer", "MoETrainer"]
