"""Typed errors. Every failure the library detects raises one of these, naming the problem."""


class EvermindError(Exception):
    """Base class of every error evermind-vk raises on purpose."""


class DeviceError(EvermindError):
    """No Vulkan device, a bad device index or name, or a device-level failure."""


class UnsupportedError(EvermindError):
    """An unsupported dtype, shape, or a kernel variant the device cannot run."""


class ShapeError(EvermindError, ValueError):
    """Operand shapes do not fit together."""


class KernelError(EvermindError):
    """The generated kernel set is missing, stale, or disagrees with the runtime."""
