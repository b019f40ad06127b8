"""The runtime layer: Vulkan devices, tensors, the generated kernel set and its dispatch, recording
and replay, and every variant-selection rule. Imports nothing else of evermind_vk but `errors`."""
from .device import Device, DeviceInfo, devices, get_device
from .profiler import Profile, profile
from .program import Program, record
from .tensor import Tensor, empty, tensor, zeros
from .tensor import arena

__all__ = ["Device", "DeviceInfo", "devices", "get_device", "Program", "record", "Profile", "profile", "Tensor", "empty",
           "tensor", "zeros", "arena"]
