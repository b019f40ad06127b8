"""The train layer: the one Trainer (recorded steps, one submit each) for every model type, its presets
(builderforce's EvermindLMTrainer, MoETrainer, MambaTrainer; ImageTrainer), AdamW and clipping, the loss
scaler, LR schedules, data sources, the byte tokenizer, generation and the loss plot."""
from .bf_trainers import EvermindLMTrainer, MambaTrainer, MoETrainer
from .config import TrainConfig
from .data import RowSource, SequenceSource, TokenSource, batches, build_chunks, default_corpus
from .generate import generate
from .image import ImageTrainer, image_grid_png, shapes_dataset
from .optim import AdamW, ClipMetrics, GradScaler, clip_grad_norm
from .schedule import LRSchedule, lr_at
from .tokenizer import ByteTokenizer
from .trainer import Trainer

__all__ = ["Trainer", "TrainConfig", "AdamW", "ClipMetrics", "GradScaler", "clip_grad_norm", "LRSchedule", "lr_at",
           "ByteTokenizer", "generate", "build_chunks", "batches", "default_corpus", "TokenSource", "SequenceSource",
           "RowSource", "ImageTrainer", "image_grid_png", "shapes_dataset", "EvermindLMTrainer", "MoETrainer",
           "MambaTrainer"]
