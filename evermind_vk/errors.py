"""Typed errors. Every failure the library detects raises one of these, naming the problem."""


class EvermindError(Exception):
    """Base class of every error evermind-vk raises on purpose."""


class DeviceError(EvermindError):
    """No Vulkan device, a bad device index or name, or a device-level failure."""


class UnsupportedError(EvermindError):
    """An unsupported dtype, shape, or a kernel variant the device cannot run."""


class ShapeError(EvermindError, ValueError):
    """Operand shapes do not fit together."""


class IndexOutOfRangeError(ShapeError, IndexError):
    """A tensor index or dimension outside the tensor's shape (an IndexError, as Python's sequences raise)."""


class KernelError(EvermindError):
    """The generated kernel set is missing, stale, or disagrees with the runtime."""


class BlobError(EvermindError, ValueError):
    """A blob (checkpoint, package, frame) read from disk or a stranger is malformed. Subclasses say how."""


class TruncatedError(BlobError):
    """The blob ends before what its header claims."""


class FormatError(BlobError):
    """Bad magic, version, layout, JSON or field values."""


class IntegrityError(BlobError):
    """A checksum or hash does not match the content."""


class LimitError(BlobError):
    """The blob claims more than the reader allows (size, window, count)."""


class CheckpointMismatchError(EvermindError):
    """A checkpoint's metadata differs from what the caller expected (and no forced resume)."""


class ConfigError(EvermindError, ValueError):
    """A configuration or hyperparameter value is out of its domain (non-finite, negative, zero, ...)."""


class DistributedError(EvermindError):
    """A data-parallel collective failed or timed out (a peer rank died or stalled), or the ranks disagree."""


class TokenError(EvermindError, ValueError):
    """Token ids that are not integers in [0, vocab_size)."""


# -- io hardening (checkpoint store) ---------------------------------------------------------------
class CheckpointKeyCollisionError(CheckpointMismatchError):
    """Two checkpoint keys map to one file name (e.g. "run é" and "run ü" -> run__.json): refused, so the
    lineage of one key never continues another's."""


class BindingLimitError(UnsupportedError):
    """A kernel binds more storage buffers than the device allows a dispatch
    (maxPerStageDescriptorStorageBuffers and its relatives; see runtime.select.bindings.max_bindings)."""


class UnsupportedArchitectureError(UnsupportedError):
    """A pretrained model file of an architecture (or an architectural option) the loader does not build."""


# -- hostile input: file kinds, parsed structure, non-finite weights, capacity ---------------------
class NotRegularFileError(EvermindError, OSError):
    """A path a user gave is not a regular file after resolving links (a character device such as
    /dev/zero, a FIFO, a socket, a directory): refused at open, before any byte is read. An OSError
    too, with .filename naming the path."""


class NonFiniteError(FormatError):
    """Weights or optimizer state hold NaN/Inf: refused on save and on load/resume unless the caller
    passes allow_nonfinite=True. The message names each tensor and its count."""


class CapacityError(EvermindError, MemoryError):
    """A model (parameters + optimizer state) or a file's declared content is larger than the host or
    device memory present: refused before allocating. A MemoryError too."""


class StructureLimitError(LimitError, FormatError):
    """JSON whose structure passes a limit (nesting depth, value count, string length), refused before
    parsing: its Python objects would cost far more memory than its bytes."""
