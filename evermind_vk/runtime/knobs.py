"""Every EVERMIND_VK_* environment variable, declared once: its name, type, default and meaning.

`get(name)` is the one place evermind-vk reads one (tests/test_knobs.py fails if any other module of the
package reads our variables from os.environ). A variable is read where it takes effect, at each use, so a
process (or a test) may change it between calls; its text is parsed once per distinct value. docs/knobs.md
is generated from KNOBS by tools/knobs_doc.py.

Types:
  flag   unset or empty: the default; "0": off; anything else: on
  count  a non-negative integer; 0 (the default) lets the selector choose
  float  a number
  choice one of the listed words, lower-cased; the selection rule that reads it refuses any other word
  text   free text, used as given (stripped)
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from ..errors import ConfigError

TYPES = ("flag", "count", "float", "choice", "text")


@dataclass(frozen=True)
class Knob:
    """One environment variable: `group` orders the docs' table; `scope` is "package" (read by evermind_vk),
    "bench" (read only by the benchmark scripts) or "tests" (read only by the test suite)."""

    name: str
    type: str
    default: object
    meaning: str
    group: str
    choices: tuple = ()
    scope: str = "package"


KNOBS: tuple[Knob, ...] = (
    # Device choice
    Knob("EVERMIND_VK_DEVICE", "text", "",
         "The device to use when none is given: an index into `evermind-vk devices` or a substring of a device's "
         "name (e.g. `nvidia`). Unset: device 0; under `--nproc`, rank r takes the r-th GPU round-robin.",
         "device choice"),
    # Kill switches: the device looks as if it lacked the feature
    Knob("EVERMIND_VK_DISABLE_F16", "flag", False,
         "Treat 16-bit storage and float16 arithmetic as absent: f16 variants are never selected and "
         "`precision=\"f16\"` raises UnsupportedError.", "kill switches"),
    Knob("EVERMIND_VK_DISABLE_COOPMAT", "flag", False,
         "Treat cooperative matrices (KHR and NVIDIA's cooperative_matrix2) as absent: f16 matmuls run without "
         "tensor cores.", "kill switches"),
    Knob("EVERMIND_VK_DISABLE_COOPMAT2", "flag", False,
         "Treat `VK_NV_cooperative_matrix2` alone as absent (the cm2 matmuls; KHR cooperative matrices stay).",
         "kill switches"),
    Knob("EVERMIND_VK_DISABLE_SUBGROUP_BROADCAST", "flag", False,
         "Treat subgroupBroadcast in subgroups of 8 as absent: CPU devices' matmuls load A in every thread (the v4 "
         "blocks without flag sb), and their norms, cross entropy, two-stage sums and L2 norms reduce through shared "
         "memory and barriers (the row and reduce variants without flag sb).", "kill switches"),
    Knob("EVERMIND_VK_DISABLE_SUBGROUP_ARITHMETIC", "flag", False,
         "Treat subgroupAdd / subgroupMax in subgroups of 8 as absent: CPU devices' fused attention rows (flag uR) "
         "combine the lanes' partials through shared memory (the variants without flag sa).", "kill switches"),
    Knob("EVERMIND_VK_DISABLE_SHARED_PIPELINES", "flag", False,
         "Build a pipeline per tensor set, as stock kp does, instead of once per variant (ci/patches/0008).",
         "kill switches"),
    Knob("EVERMIND_VK_DISABLE_RECORD_REUSE", "flag", False,
         "Give every allocation inside a recording a new buffer (no reuse of dead tensors' buffers).",
         "kill switches"),
    Knob("EVERMIND_VK_DISABLE_RECORD_PLAN", "flag", False,
         "Place a recording's buffers as it allocates (best fit among dead tensors' buffers, as PyTorch's caching "
         "allocator) instead of planning them by lifetime when the recording ends.",
         "kill switches"),
    Knob("EVERMIND_VK_DISABLE_BARRIER_ELISION", "flag", False,
         "Keep a barrier before every dispatch of a recording instead of only where a dependency needs one.",
         "kill switches"),
    Knob("EVERMIND_VK_NORM_MULTI", "flag", True,
         "`ops.l2_norm` reads up to 8 tensors a dispatch; `0` runs one dispatch a tensor (same bits).",
         "kill switches"),
    # Forcing a kernel choice (benchmarks, bisecting); a forced choice that cannot run is an error
    Knob("EVERMIND_VK_MATMUL_VARIANT", "text", "",
         "Force one matmul variant by name (e.g. `matmul_f32_v4_t128x64`) wherever its launch rules hold.",
         "kernel selection"),
    Knob("EVERMIND_VK_MATMUL_SPLIT_K", "text", "",
         "Parallel split-K of matmuls: `0` never splits, `n` forces n chunks; unset: the selector's rule.",
         "kernel selection"),
    Knob("EVERMIND_VK_TRI_SPLIT", "text", "",
         "K chunks of causal attention products: `0` or `1` never splits, `n` splits n ways; unset: GPUs split "
         "long products of few workgroups.", "kernel selection"),
    Knob("EVERMIND_VK_ATTENTION", "choice", "",
         "Attention path: `matmul` or `fused`; unset: fused on CPU devices where a fused variant fits, else "
         "matmul.", "kernel selection", choices=("", "matmul", "fused")),
    Knob("EVERMIND_VK_ATTENTION_PROBS", "choice", "",
         "The matmul attention path's probabilities: `keep` them for the backward or `recompute` them there; "
         "unset: recompute where they outgrow the layer's other activations (long sequences).",
         "kernel selection", choices=("", "keep", "recompute")),
    Knob("EVERMIND_VK_DECODE_FUSED", "choice", "",
         "Recorded decode step of a TransformerLM, an EvermindLM or a HybridMambaModel: `0` runs the per-op kernels, "
         "`1` one fused dispatch a block (`decode_layer`, `evermind_layer`; `mamba1_decode` and `hybrid_attn_decode` "
         "for a stack's mamba1 and attention layers, its others per-op) wherever it can run (an error where it "
         "cannot); unset: the fused kernel on CPU "
         "devices where it can run (f32, no unmerged LoRA adapters, no quantized weights, small enough for one "
         "workgroup a sequence).",
         "kernel selection", choices=("", "0", "1")),
    Knob("EVERMIND_VK_DECODE_CHAIN", "count", 0,
         "Tokens a sequence one recorded decode replay chooses (each step's picks fed to the next on the device, "
         "one submit and one read-back for them all; rounded down to a power of two); `1`: one token a replay; "
         "0 (unset): the tuned value of the device type.", "kernel selection"),
    Knob("EVERMIND_VK_ATTENTION_VARIANT", "text", "",
         "Force one fused attention configuration by the tail of its name (e.g. `d64_p2_r64x64`).", "kernel selection"),
    Knob("EVERMIND_VK_ROW_WG", "count", 0,
         "Workgroup size of the one-row-a-workgroup kernels (RMSNorm, cross-entropy and their backwards).",
         "kernel selection"),
    Knob("EVERMIND_VK_SOFTMAX_ROWS", "count", 0,
         "Rows a workgroup of softmax and its backward (1, 4 or 16).", "kernel selection"),
    Knob("EVERMIND_VK_NORM_BLOCK_ROWS", "count", 0,
         "Rows a workgroup of `rms_norm_backward` (CPU devices run several rows a block).", "kernel selection"),
    Knob("EVERMIND_VK_RANK_LANES", "count", 0,
         "Threads a token of `embedding_rank` (the counting sort of the sorted embedding backward); a power of "
         "two up to 256.", "kernel selection"),
    Knob("EVERMIND_VK_EMBEDDING_BACKWARD", "choice", "",
         "Embedding backward path: `scan` or `sorted`; unset: sorted where tokens < table size / columns.",
         "kernel selection", choices=("", "scan", "sorted")),
    # Training and the command line
    Knob("EVERMIND_VK_DIST_TIMEOUT", "float", 60.0,
         "Seconds a data-parallel collective waits for a peer before raising DistributedError: a stalled or dead "
         "rank is detected within this. Raise it when one step legitimately takes longer.", "training"),
    Knob("EVERMIND_VK_RANK_ERROR_FILE", "text", "",
         "Set by the `--nproc` launcher for each rank: the file where the rank writes its one-line error, so the "
         "launcher reports a failed run once. Not for users.", "training"),
    Knob("EVERMIND_VK_JSON_MAX_DEPTH", "count", 0,
         "Hostile JSON (checkpoints, manifests, safetensors headers, configs, token lists): the deepest nesting "
         "read. 0: the default, 64.", "hostile input"),
    Knob("EVERMIND_VK_JSON_MAX_ELEMENTS", "count", 0,
         "Hostile JSON: the most values (containers, numbers, strings) in one document, checked before parsing "
         "(parsed JSON costs ~90 bytes per value). 0: the default, 524288.", "hostile input"),
    Knob("EVERMIND_VK_JSON_MAX_STRING", "count", 0,
         "Hostile JSON: the longest string, in bytes. 0: the default, 4194304 (4 MiB).", "hostile input"),
    Knob("EVERMIND_VK_TRACEBACK", "flag", False,
         "The command line prints the full traceback of an error instead of one `evermind-vk: error:` line.",
         "command line"),
    # Benchmarks
    Knob("EVERMIND_VK_IREE_PYTHON", "text", "",
         "`bench/iree_bench.py`: the python of IREE's virtualenv (default of `--iree-python`).", "benchmarks",
         scope="bench"),
    # Tests
    Knob("EVERMIND_VK_SLOW_TESTS", "flag", False,
         "`tests/ops/test_sample.py`: also run the 10,000-draw distribution tests of the device sampler.", "tests",
         scope="tests"),
)

BY_NAME: dict[str, Knob] = {k.name: k for k in KNOBS}


def knob(name: str) -> Knob:
    """The declaration of `name`; ConfigError for a variable nobody declared."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ConfigError(f"{name} is not an evermind-vk variable (see evermind_vk/runtime/knobs.py)") from None


def get(name: str, env=None):
    """The value of variable `name` from `env` (default os.environ), parsed by its declared type; the default
    when it is unset or empty. ConfigError names the variable when its text does not parse."""
    k = knob(name)
    raw = (os.environ if env is None else env).get(name, "")
    return _parse(k, raw.strip())


@functools.lru_cache(maxsize=256)
def _parse(k: Knob, raw: str):
    if not raw:
        return k.default
    if k.type == "flag":
        return raw != "0"
    if k.type == "count":
        if not raw.isdigit():
            raise ConfigError(f"{k.name}={raw!r}: want a non-negative integer")
        return int(raw)
    if k.type == "float":
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{k.name}={raw!r} is not a number") from None
    if k.type == "choice":  # validated by the rule that owns the words (runtime.variants), which names the variable
        return raw.lower()
    return raw


def snapshot(env=None) -> dict:
    """Every package variable's current value (parsed), by name."""
    return {k.name: get(k.name, env) for k in KNOBS if k.scope == "package"}
