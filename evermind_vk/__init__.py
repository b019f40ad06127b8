"""evermind-vk: train and run small neural models on any Vulkan device, with no CUDA."""
from .device import Device, DeviceInfo, devices, get_device
from .errors import DeviceError, EvermindError, KernelError, ShapeError, UnsupportedError
from .ops import add, matmul, matmul_backward, mul, scale
from .program import Program, record
from .tensor import Tensor, empty, tensor, zeros

__version__ = "0.1.0"

__all__ = [
    "Device", "DeviceInfo", "devices", "get_device", "Tensor", "tensor", "empty", "zeros",
    "add", "mul", "scale", "matmul", "matmul_backward", "record", "Program",
    "EvermindError", "DeviceError", "UnsupportedError", "ShapeError", "KernelError",
]
