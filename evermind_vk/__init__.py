"""evermind-vk: train and run small neural models on any Vulkan device, with no CUDA.

Layers (each imports only those below it; a test guards it):
    runtime   devices, tensors, kernels and their dispatch, recording/replay, variant rules
    ops       one module per op family, forward and backward kernels
    autodiff  the gradient tape and differentiable ops
    models    configurations and models
    train     trainer, optimizer, schedules, data, tokenizer, generation, plots
    io        file formats beside them (never models); `files` joins models and formats
"""
from .errors import ConfigError, DeviceError, EvermindError, KernelError, ShapeError, TokenError, UnsupportedError
from .files import load
from .ops import add, matmul, matmul_backward, mul, scale
from .runtime import Device, DeviceInfo, Program, Tensor, devices, empty, get_device, record, tensor, zeros
from .runtime.profiler import Profile, profile

__version__ = "0.1.0"

__all__ = [
    "Device", "DeviceInfo", "devices", "get_device", "Tensor", "tensor", "empty", "zeros",
    "add", "mul", "scale", "matmul", "matmul_backward", "record", "Program", "load", "profile", "Profile",
    "EvermindError", "DeviceError", "UnsupportedError", "ShapeError", "KernelError",
    "ConfigError", "TokenError",
]
