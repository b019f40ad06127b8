"""Recorded decoding's kernels (evermind_vk.train.decode): positions read from a device buffer (rope_at,
kv_write, attention_decode) and the device sampler (sample). attention_decode comes in workgroups of 16 to
128 threads, one (sequence, head) each: pick_decode_wg chooses; the sampler in workgroups of 8 to 256 threads,
one item each: pick_sample_wg chooses.

decode_layer is a whole transformer block for one new token of each sequence in one dispatch (one workgroup
a sequence), mamba1_decode a whole mamba1 block of a HybridMambaModel the same way, hybrid_attn_decode a whole
attention layer of a HybridMambaModel (decode_layer's section without RoPE and MLP, with biases): `plan` is the
one rule that says whether a decode step (a Launch: TransformerLM; a MambaLaunch: HybridMambaModel, for each of
its mamba1 and attention layer kinds) runs on them (the fused step) or on the per-op kernels (the unfused step). evermind_layer is the same for an EvermindLM block (its
section at the end, its ConvLaunch taken by the same `plan` and knob)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import UnsupportedError
from ..manifest import usable
from .bindings import binding_errors, max_bindings
from .loops import DEVICE_LOOP_CAP, MAX_LOOP
from .table import F, Row, Tuned, simple

ROWS = [
    *(simple("decode", op, dt, 256) for op in ("rope_at", "kv_write", "rope_kv_at") for dt in F),
    *(Row("decode", "attention_decode", dt, (("WG", wg),), tile=f"wg{wg}") for wg in (16, 32, 64, 128) for dt in F),
    *(Row("sample", "sample", dt, (("WG", wg),), tile=f"wg{wg}") for wg in (8, 16, 32, 64, 256) for dt in F),
    # One transformer block per sequence and dispatch (f32 only: the decoder's caches and weights are f32).
    # SW: its shared memory in vec4s (24 KiB: the default model's block needs 364 at 256 positions).
    # flag q4: up to 4 sequences a workgroup (each weight load serves them all); without, one (no per-sequence
    # tests: lavapipe runs every load of an unrolled sequence loop, taken or not: ~25% slower at one sequence).
    # (Subgroup broadcasts of the products' shared vectors, matmul_v4's flag sb: lane l loading step k + l for the
    # others, were 1.2-2.5x slower a step in all three fused kernels at B = 1, 8, 32 on lavapipe: its shared
    # loads are a small part of a step, the unrolled broadcast chunks cost more.)
    *(Row("decode", "decode_layer", "f32", (("WG", 64), ("SW", 1536)), flags=fl) for fl in ((), ("q4",))),
    # One mamba1 block of a HybridMambaModel per sequence and dispatch, the same design (f32, flag q4); SW: 24 KiB
    # (the default model's block needs 169 vec4s a sequence). WG 16: lavapipe runs a workgroup's barriers per
    # 8-lane subgroup, and the block's loads and stores, not its lanes, set its time (the default model's B = 8
    # step ~12% faster than at 64 threads, B = 1 ~5%, interleaved runs).
    # flag q8: up to 8 sequences a workgroup, where the batch gives each of CPU_GROUPS workgroups 8 (plan).
    *(Row("decode", "mamba1_decode", "f32", (("WG", 16), ("SW", 1536)), flags=fl) for fl in ((), ("q4",), ("q8",))),
    # One attention layer of a HybridMambaModel per sequence and dispatch: decode_layer's section without RoPE and
    # MLP, with biases (f32, flag q4); SW: 24 KiB (the default model's layer needs 64 vec4s a sequence and 4 (L/4 + 1)
    # for the scores: L up to ~1470 positions, i.e. the doubling capacities up to 1024, for one sequence a workgroup;
    # past that its attention layers run per-op). WG 16: mamba1_decode's reason (64 was no faster, interleaved runs).
    *(Row("decode", "hybrid_attn_decode", "f32", (("WG", 16), ("SW", 1536)), flags=fl) for fl in ((), ("q4",))),
]

TUNED = {
    "LAYER_DEVICE_TYPES": Tuned(("cpu",), "unforced, the fused decode step runs on CPU devices only: lavapipe pays "
                                          "~23 us a dispatch, and one workgroup a sequence leaves a GPU idle",
                                "bench/results/evidence/lavapipe-decode-tuning.txt"),
    "CPU_GROUPS": Tuned(2, "CPU devices: workgroups a fused step keeps busy (lavapipe's threads: one a core of the "
                           "2-core machine); the batch's sequences are shared among them, up to SEQS_MAX a workgroup",
                        "bench/results/evidence/lavapipe-decode-tuning.txt"),
    "CPU_MAX_LAYER_WEIGHTS": Tuned(1 << 19, "unforced, CPU devices run decode_layer for blocks of at most this many "
                                             "weights: one workgroup (one core) a sequence reads them all, and past "
                                             "~590k (d 256) the per-op step's products on every core win",
                                   "bench/results/evidence/lavapipe-decode-tuning.txt"),
    "Q8_SEQS": Tuned(8, "CPU devices: the q8 variant (8 sequences a workgroup) only where a workgroup gets 8 (the "
                        "batch over CPU_GROUPS): lavapipe runs every load of the unrolled sequence loop, taken or not; "
                        "at 8, q8 beats q4 (evermind_layer 13-20%, mamba1_decode ~5-8% a step at B = 16 and 32)",
                     "bench/results/evidence/lavapipe-decode-tuning.txt"),
    "CHAIN": Tuned({"cpu": 1, "gpu": 1}, "tokens a sequence one decode replay chooses (train/decode.py _run_chain), by "
                                         "device type: the replay's submit, wait and read-back are paid once for them all",
                   "bench/results/evidence/decode-chain.txt"),
}
LAYER_DEVICE_TYPES = TUNED["LAYER_DEVICE_TYPES"].value
CPU_GROUPS = TUNED["CPU_GROUPS"].value
SEQS_MAX = 8  # the templates' largest SQ (flag q8): accumulators a thread keeps for each product output
CPU_MAX_LAYER_WEIGHTS = TUNED["CPU_MAX_LAYER_WEIGHTS"].value
Q8_SEQS = TUNED["Q8_SEQS"].value
# The multi-sequence flags, largest first: (flag, its SQ, the fewest sequences a workgroup runs with it).
SEQ_FLAGS = (("q8", 8, Q8_SEQS), ("q4", 4, 2))


def chain_tokens(device_type: str, forced: int = 0) -> int:
    """The most tokens a sequence one decode replay chooses: `forced` (EVERMIND_VK_DECODE_CHAIN; 1: one a replay)
    where > 0, else TUNED["CHAIN"] for the device type (CPU devices; any other: the GPU value)."""
    if forced:
        return int(forced)
    chain = TUNED["CHAIN"].value
    return chain["cpu"] if device_type == "cpu" else chain["gpu"]


def chain_floor(k: int) -> int:
    """The tokens a decode replay runs for a wish of k >= 1: the largest power of two <= k (each length a
    program of its own: powers of two keep them few)."""
    return 1 << (int(k).bit_length() - 1)


def seqs_cap(flags) -> int:
    """Sequences a workgroup of a fused kernel's variant with these flags can run (its SQ)."""
    return next((sq for f, sq, _ in SEQ_FLAGS if f in flags), 1)


LAYER_PATHS = ("", "0", "1")


@dataclass(frozen=True)
class Launch:
    """A decode step of a TransformerLM: its shapes, the dtype of its caches and weights, and what of the model
    the fused kernel cannot run (unmerged LoRA adapters, quantized weights)."""
    d: int
    heads: int
    kv_heads: int
    head_dim: int
    d_ff: int
    max_len: int
    dtype: str = "f32"
    adapters: bool = False
    quantized: bool = False
    vocab: int = 0  # the head's rows (0: no head to fold into the last block)
    items: int = 1  # sequences a step feeds

    @property
    def layer_weights(self) -> int:
        """Weight elements of one block: wq, wk, wv, wo, w_gate_up, w_down."""
        return self.d * (2 * (self.heads + self.kv_heads) * self.head_dim + 3 * self.d_ff)


@dataclass(frozen=True)
class MambaLaunch:
    """A decode step of a HybridMambaModel: its shapes (d_model, d_inner, dState, dConv, dt rank; the attention
    layers' heads and cache capacity), its layer kinds (mamba1_decode runs its mamba1 blocks, hybrid_attn_decode
    its attention layers, the others run per-op) and the dtype of its state and weights."""
    d: int
    d_inner: int
    d_state: int
    d_conv: int
    dt_rank: int
    layers: tuple = ("mamba1",)
    dtype: str = "f32"
    vocab: int = 0  # the tied head's rows (0: no head to fold into the last block)
    items: int = 1  # sequences a step feeds
    heads: int = 0  # an attention layer's heads (MHA: head dim d / heads)
    max_len: int = 0  # positions an attention layer's caches hold now (programs are recorded again when they grow)

    @property
    def attention_weights(self) -> int:
        """Weight elements of one attention layer: wQKV [3d, d] and wO [d, d] (biases and norm gain left out)."""
        return 4 * self.d * self.d

    @property
    def layer_weights(self) -> int:
        """Weight elements of one mamba1 block: the in, x, dt and out projections, the conv taps, A_log
        (biases, norm gain and D left out: vectors)."""
        d, D, N, R = self.d, self.d_inner, self.d_state, self.dt_rank
        return 2 * D * d + D * self.d_conv + (R + 2 * N) * D + D * R + D * N + d * D


@dataclass(frozen=True)
class Knobs:
    """EVERMIND_VK_DECODE_FUSED: '' (the rule), '0' (never), '1' (wherever the fused kernel, decode_layer,
    mamba1_decode, hybrid_attn_decode or evermind_layer, can run; an error where it cannot)."""
    fused: str = ""


@dataclass(frozen=True)
class Plan:
    """The decode step's path: variant is the fused kernel's variant (decode_layer, evermind_layer; a MambaLaunch's
    first fused kind's: mamba1_decode or hybrid_attn_decode) or None (the per-op kernels);
    why: the reasons it is not fused (empty when fused or turned off); head: the last block also computes the
    logits (the head's product within the loop cap), else the head runs as its own product."""
    variant: object
    why: tuple = ()
    head: bool = False
    seqs: int = 1  # sequences a workgroup runs (each load of a weight serves them all)
    layers: tuple = ()  # a MambaLaunch's layer kinds that run on their fused kernels (MAMBA_KINDS)


def _attention_loops(push: dict, wg: int) -> int:
    """The loop iterations of what decode_layer and hybrid_attn_decode share (templates/decode.comp.j2): the
    attention norm, the q, k and v products, scores, softmax and outputs at the longest context (L positions),
    the out-projection, the reductions of the norm and of one more (push: their push constants)."""
    c = lambda n: -(-n // wg)  # noqa: E731  a thread's share of n items
    d4, H, KVH, D, L4 = push["d"] // 4, push["H"], push["KVH"], push["D"], -(-push["L"] // 4)
    HD4, KD4, D4, S = H * D // 4, KVH * D // 4, D // 4, push["S"]
    return (2 * c(d4) + c(HD4) * d4 + c(KD4) * d4  # norm, q, k and v
            + S * (c(H * L4) * D4 + 1) + c(S * H) * 2 * L4 + S * (c(HD4) * L4 + 1)  # scores, softmax, outputs
            + c(d4) * (HD4 + 1) + 2 * (wg.bit_length() + 1))  # wo, two norms' reductions


def layer_loop_count(push: dict, wg: int) -> int:
    """The most loop iterations one invocation of decode_layer runs, all its loops together (push: its
    push constants; the attention loops at the longest context, L positions)."""
    c = lambda n: -(-n // wg)  # noqa: E731  a thread's share of n items
    d4, H, KVH, D, F4 = push["d"] // 4, push["H"], push["KVH"], push["D"], push["F"] // 4
    head = c(-(-push["V"] // 4)) * d4 if push["head"] else 0  # the logits (the last block)
    return (_attention_loops(push, wg) + c(push["S"] * (H + KVH) * (D // 8))  # RoPE
            + c(F4) * d4 + c(d4) * (F4 + 1) + (wg.bit_length() + 1) + head)  # gate/up, down + the third norm


def hattn_loop_count(push: dict, wg: int) -> int:
    """The most loop iterations one invocation of hybrid_attn_decode runs, all its loops together (push: its
    push constants; the attention loops at the longest context, L positions)."""
    c = lambda n: -(-n // wg)  # noqa: E731  a thread's share of n items
    d4 = push["d"] // 4
    final = c(d4) + (c(-(-push["V"] // 4)) * (d4 + 1) if push["head"] else 0) if push["final"] else 0
    return _attention_loops(push, wg) + final  # the final norm and the logits (the last layer)


def hattn_shared_vec4s(launch: MambaLaunch) -> int:
    """hybrid_attn_decode's shared vec4s a sequence: h, x, q, the attention output, then each head's scores and
    softmax sum (templates/decode.comp.j2)."""
    return (2 * launch.d + 2 * launch.d) // 4 + launch.heads * (-(-launch.max_len // 4) + 1)


def hattn_push(launch: MambaLaunch, items: int, embed: int = 0, final: int = 0, head: int = 0, seqs: int = 1,
               ids_at: int = 0, eps: float = 1e-6) -> dict:
    """hybrid_attn_decode's push constants for `items` sequences (embed: the layer reads the embedding rows of the
    ids from word ids_at of its ids binding instead of x; final: it ends with the final norm, head: and the
    logits, launch.vocab of them; seqs: sequences a workgroup). MHA: as many kv heads as heads."""
    H = launch.heads
    D = launch.d // H
    return dict(R=items, d=launch.d, H=H, KVH=H, D=D, L=launch.max_len, V=launch.vocab, embed=int(embed),
                final=int(final), head=int(head), eps=float(eps), scale=1.0 / math.sqrt(D), S=int(seqs),
                ids_at=int(ids_at))


def hattn_errors(launch: MambaLaunch, v, device) -> list[str]:
    """Why hybrid_attn_decode's variant v cannot run a launch's attention layers on a device (empty: it can)."""
    why = []
    if launch.dtype != v.dtype:
        why.append(f"hybrid_attn_decode computes {v.dtype}, the step is {launch.dtype}")
    if launch.heads < 1 or launch.d % launch.heads or launch.d % 4 or (launch.d // launch.heads) % 4 \
            or launch.max_len < 1:
        why.append(f"shapes: dModel {launch.d} must be whole heads ({launch.heads}) of a multiple of 4 (vec4 "
                   f"loads), the caches hold {launch.max_len} positions (want >= 1)")
        return why  # the capacity checks below need whole heads
    return why + _capacity_errors(v, device, hattn_loop_count(hattn_push(launch, 1, final=1), v.spec["WG"]),
                                  hattn_shared_vec4s(launch), too_large="too large a model or context")


def shared_vec4s(launch: Launch) -> int:
    """decode_layer's shared vec4s for a launch: h, x, q, k, the attention output and g, then each head's
    scores and softmax sum (templates/decode.comp.j2)."""
    H, KVH, D = launch.heads, launch.kv_heads, launch.head_dim
    return (2 * launch.d + 2 * H * D + KVH * D + launch.d_ff) // 4 + H * (-(-launch.max_len // 4) + 1)


def _capacity_errors(v, device, loops: int, vec4s: int, shared_bytes: int | None = None,
                     too_large: str = "too large a model") -> list[str]:
    """What every fused decode kernel checks of a launch beside its shapes: its loop count within MAX_LOOP,
    its shared vec4s a sequence within the variant's SW, the variant's shared memory (default 16 (SW + WG)
    bytes) within the device's, and its bindings within the device's limit."""
    why = []
    if loops > MAX_LOOP:
        why.append(f"{loops} loop iterations an invocation > MAX_LOOP = {MAX_LOOP} (one workgroup a sequence: "
                   "too large a model)")
    if vec4s > v.spec["SW"]:
        why.append(f"{vec4s} vec4s of shared memory > the variant's {v.spec['SW']} ({too_large})")
    used = 16 * (v.spec["SW"] + v.spec["WG"]) if shared_bytes is None else shared_bytes
    if used > device.info.shared_memory:
        why.append(f"{v.name} uses {used} bytes of shared memory, the device has {device.info.shared_memory}")
    return why + binding_errors(v, max_bindings(device.info))


def layer_errors(launch: Launch, v, device) -> list[str]:
    """Why decode_layer's variant v cannot run a launch on a device (empty: it can)."""
    why = []
    if launch.dtype != v.dtype:
        why.append(f"decode_layer computes {v.dtype}, the step is {launch.dtype}")
    if launch.adapters:
        why.append("unmerged LoRA adapters (decode_layer has no adapter products)")
    if launch.quantized:
        why.append("quantized weights (decode_layer reads f32 weights)")
    if launch.d % 4 or launch.d_ff % 4 or launch.head_dim % 8 or launch.heads % launch.kv_heads:
        why.append(f"shapes: d {launch.d} and d_ff {launch.d_ff} must be multiples of 4, the head dim "
                   f"{launch.head_dim} of 8 (vec4 loads), heads {launch.heads} a multiple of kv heads {launch.kv_heads}")
    return why + _capacity_errors(v, device, layer_loop_count(layer_push(launch, 1, 0, 0), v.spec["WG"]),
                                  shared_vec4s(launch), too_large="too large a model or context")


def layer_push(launch: Launch, items: int, embed: int, vocab: int, eps: float = 1e-6, theta: float = 10000.0,
               limit: float = 0.0, head: int = 0, seqs: int = 1, ids_at: int = 0) -> dict:
    """decode_layer's push constants for `items` sequences (embed: the layer reads the embedding rows of
    `vocab` ids, from word ids_at of its ids binding, instead of x; head: it ends with the logits, `vocab` of
    them; seqs: sequences a workgroup)."""
    H, D = launch.heads, launch.head_dim
    return dict(R=items, d=launch.d, H=H, KVH=launch.kv_heads, D=D, F=launch.d_ff, L=launch.max_len, V=int(vocab),
                embed=int(embed), eps=float(eps), scale=1.0 / math.sqrt(D), log2_theta=math.log2(theta),
                limit=float(limit), head=int(head), S=int(seqs), ids_at=int(ids_at))


def mamba_loop_count(push: dict, wg: int) -> int:
    """The most loop iterations one invocation of mamba1_decode runs, all its loops together (push: its push
    constants), the loops the compiler unrolls (softplus' and the input term's series) counted too."""
    c = lambda n: -(-n // wg)  # noqa: E731  a thread's share of n items
    d4, D4, N4, DR, S = push["d"] // 4, push["Di"] // 4, push["N"] // 4, push["DR"], push["S"]
    DR4 = -(-DR // 4)
    red = 2 * (wg.bit_length() + 1) * -(-S // 4)  # the two norms' reductions (four sequences each)
    final = c(d4) + (c(-(-push["V"] // 4)) * (d4 + 1) if push["head"] else 0)  # the final norm, the logits
    return (2 * c(d4) + c(2 * D4) * (d4 + 1) + c(D4) * push["K"] + c(DR4 + 2 * N4) * (D4 + 1)  # norm, in, conv, x
            + c(D4) * (DR4 + 1 + 40 * S + N4 * (1 + 40 * S))  # the scan (4 channels a thread): dt, softplus, states
            + c(d4) * (D4 + 1) + red + final)  # out_proj, the final norm and logits


def mamba_shared_vec4s(launch: MambaLaunch) -> int:
    """mamba1_decode's shared vec4s a sequence: h, x, xc (then y), z, u, dt_raw, B, C
    (templates/decode.comp.j2)."""
    return 2 * (launch.d // 4) + 4 * (launch.d_inner // 4) + -(-launch.dt_rank // 4) + 2 * (launch.d_state // 4)


def mamba_push(launch: MambaLaunch, items: int, embed: int = 0, final: int = 0, head: int = 0, seqs: int = 1,
               first: int = 0, ids_at: int = 0, eps: float = 1e-6, dtin: int = 2) -> dict:
    """mamba1_decode's push constants for `items` sequences from state slot `first` (embed: the block reads the
    embedding rows of the ids from word ids_at of its ids binding instead of x; final: it ends with the final
    norm, head: and the logits, launch.vocab of them; seqs: sequences a workgroup; dtin: ops.scan's input
    term code)."""
    return dict(R=items, d=launch.d, Di=launch.d_inner, N=launch.d_state, K=launch.d_conv, DR=launch.dt_rank,
                V=launch.vocab, first=int(first), embed=int(embed), final=int(final), head=int(head), S=int(seqs),
                ids_at=int(ids_at), dtin=int(dtin), eps=float(eps))


def mamba_errors(launch: MambaLaunch, v, device) -> list[str]:
    """Why mamba1_decode's variant v cannot run a launch on a device (empty: it can)."""
    why = []
    if launch.dtype != v.dtype:
        why.append(f"mamba1_decode computes {v.dtype}, the step is {launch.dtype}")
    if launch.d % 4 or launch.d_inner % 4 or launch.d_state % 4:
        why.append(f"shapes: dModel {launch.d}, dInner {launch.d_inner} and dState {launch.d_state} must be "
                   "multiples of 4 (vec4 loads)")
    # the loop count with the last block's final norm
    return why + _capacity_errors(v, device, mamba_loop_count(mamba_push(launch, 1, final=1), v.spec["WG"]),
                                  mamba_shared_vec4s(launch))


class _Kind:
    """What `plan` asks of a fused kernel: its op, why a variant cannot run a launch, its shared vec4s a
    sequence, the loop count of one invocation for `seqs` sequences a workgroup with the head folded in, and
    the weights one block reads (default: the launch's layer_weights)."""

    def __init__(self, op, errors, shared, loops_with_head, weights=lambda launch: launch.layer_weights):
        self.op, self.errors, self.shared, self.loops_with_head = op, errors, shared, loops_with_head
        self.weights = weights


_LAYER = _Kind("decode_layer", lambda launch, v, dev: layer_errors(launch, v, dev), lambda launch: shared_vec4s(launch),
               lambda launch, v, s: layer_loop_count(layer_push(launch, 1, 1, launch.vocab, head=1, seqs=s),
                                                     v.spec["WG"]))
_MAMBA = _Kind("mamba1_decode", mamba_errors, mamba_shared_vec4s,
               lambda launch, v, s: mamba_loop_count(mamba_push(launch, 1, 1, 1, 1, s), v.spec["WG"]))
_HATTN = _Kind("hybrid_attn_decode", hattn_errors, hattn_shared_vec4s,
               lambda launch, v, s: hattn_loop_count(hattn_push(launch, 1, 1, 1, 1, s), v.spec["WG"]),
               lambda launch: launch.attention_weights)
# a HybridMambaModel's layer kinds that have a fused kernel
MAMBA_KINDS = {"mamba1": _MAMBA, "attention": _HATTN}


def _kind(launch) -> _Kind:
    """The fused kernel of a Launch or ConvLaunch (a MambaLaunch has one a layer kind: MAMBA_KINDS)."""
    return _CONV if isinstance(launch, ConvLaunch) else _LAYER


def plan(launch, device, knobs: Knobs) -> Plan:
    """The decode step's path, the one rule: the fused kernel (decode_layer for a Launch, evermind_layer for a
    ConvLaunch; for a MambaLaunch, mamba1_decode for its mamba1 layers and hybrid_attn_decode for its attention
    layers, each kind decided alone: Plan.layers) where every precondition holds (layer_errors, mamba_errors,
    hattn_errors, conv_layer_errors) and, unforced, on the device types of
    LAYER_DEVICE_TYPES for blocks of at most CPU_MAX_LAYER_WEIGHTS weights; else the per-op kernels.
    EVERMIND_VK_DECODE_FUSED=0 turns it off; =1 runs it wherever it can run (any device type, any size) and
    raises UnsupportedError (with the reasons) where it cannot."""
    if knobs.fused not in LAYER_PATHS:
        raise UnsupportedError(f"EVERMIND_VK_DECODE_FUSED={knobs.fused!r}: want 0 or 1 (or unset)")
    if knobs.fused == "0":
        return Plan(None)
    if isinstance(launch, MambaLaunch):
        return _mamba_plan(launch, device, knobs)
    return _kind_plan(_kind(launch), launch, device, knobs)


def _mamba_plan(launch: MambaLaunch, device, knobs: Knobs) -> Plan:
    """A HybridMambaModel step's path: each of its layer kinds with a fused kernel (MAMBA_KINDS) through
    _kind_plan; Plan.layers names those that run fused (the others, and mamba2 and mamba3 layers, run per-op
    between them), variant and seqs are the first such kind's, head whether the last layer (fused) folds the
    head in; why: the reasons of the kinds left per-op."""
    kinds = [k for k in MAMBA_KINDS if k in launch.layers]
    if not kinds:
        why = (f"no mamba1 or attention layers ({', '.join(sorted(set(launch.layers)))}: the fused kernels run "
               "those)",)
        if knobs.fused == "1":
            raise UnsupportedError("EVERMIND_VK_DECODE_FUSED=1, but no fused kernel can run this step: " + why[0])
        return Plan(None, why)
    parts = {k: _kind_plan(MAMBA_KINDS[k], launch, device, knobs) for k in kinds}
    fused = tuple(k for k in kinds if parts[k].variant is not None)
    why = tuple(f"{MAMBA_KINDS[k].op}: {w}" for k in kinds if k not in fused for w in parts[k].why)
    if not fused:
        return Plan(None, why)
    main, last = parts[fused[0]], launch.layers[-1]
    return Plan(main.variant, why, head=last in fused and parts[last].head, seqs=main.seqs, layers=fused)


def _kind_plan(kind: _Kind, launch, device, knobs: Knobs) -> Plan:
    """plan's rule for one fused kernel (`kind`) of a launch."""
    try:  # one sequence a workgroup first (the q4 or q8 variant where the batch is shared: layer_seqs)
        cands = sorted(usable(kind.op, launch.dtype, device), key=lambda v: (seqs_cap(v.flags), v.spec["WG"]))
    except UnsupportedError as e:  # no variant of this dtype, none with the features or the bindings
        cands, why = [], [str(e)]
    else:
        why = []
    for v in cands:
        why = kind.errors(launch, v, device)
        if not why:
            break
    else:
        why = why or [f"no {kind.op} kernel for {launch.dtype} on this device"]
    if why:
        if knobs.fused == "1":
            raise UnsupportedError(f"EVERMIND_VK_DECODE_FUSED=1, but {kind.op} cannot run this step: " + "; ".join(why))
        return Plan(None, tuple(why))
    if knobs.fused != "1" and device.info.type not in LAYER_DEVICE_TYPES:
        return Plan(None, (f"{device.info.type} devices run the per-op step unless forced",))
    if knobs.fused != "1" and kind.weights(launch) > CPU_MAX_LAYER_WEIGHTS:
        return Plan(None, (f"{kind.weights(launch)} weights a block > {CPU_MAX_LAYER_WEIGHTS}: the per-op step's "
                           "products use every core",))
    # the head's product joins the last block where it is as small as a block may be (one core reads it) and
    # within the loop cap
    # sequences a workgroup (layer_seqs) on the variant of the largest flag of SEQ_FLAGS whose fewest sequences
    # that is, else one on v
    seqs = layer_seqs(launch, v, device.info.type, kind)
    multi = [(u, min(seqs, sq)) for flag, sq, least in SEQ_FLAGS if seqs >= least
             for u in cands if flag in u.flags and not kind.errors(launch, u, device)]
    v, seqs = multi[0] if multi else (v, 1)
    return Plan(v, head=0 < launch.vocab * launch.d <= CPU_MAX_LAYER_WEIGHTS
                and kind.loops_with_head(launch, v, seqs) <= MAX_LOOP, seqs=seqs)


def layer_seqs(launch, v, device_type: str, kind: _Kind) -> int:
    """Sequences a fused-kernel workgroup (of `kind`) runs: on CPU devices the batch shared among CPU_GROUPS
    workgroups, at most SEQS_MAX and as many as the variant's shared memory and the loop cap allow; one on GPUs
    (more workgroups)."""
    if device_type != "cpu":
        return 1
    s = max(1, min(SEQS_MAX, -(-launch.items // CPU_GROUPS), v.spec["SW"] // kind.shared(launch)))
    while s > 1 and kind.loops_with_head(launch, v, s) > MAX_LOOP:
        s -= 1
    return s


def loop_count(op: str, spec: dict, flags, push: dict) -> int | None:
    """decode_layer's loop count (layer_loop_count), mamba1_decode's (mamba_loop_count), hybrid_attn_decode's
    (hattn_loop_count), evermind_layer's
    (conv_layer_loop_count), sample's (sample_loop_count); None for the other ops."""
    if op == "sample":
        return sample_loop_count(push["cols"], spec["WG"])
    if op == "mamba1_decode":
        return mamba_loop_count(push, spec["WG"])
    if op == "hybrid_attn_decode":
        return hattn_loop_count(push, spec["WG"])
    if op == "evermind_layer":
        return conv_layer_loop_count(push, spec["WG"])
    return layer_loop_count(push, spec["WG"]) if op == "decode_layer" else None


def pick_decode_wg(cands, D: int, device_type: str):
    """attention_decode's variant: the fewest threads >= the head dimension on CPU devices (each barrier of
    the workgroup's reductions costs per thread there) or, on GPUs, the most (the keys are spread over the
    threads). Raises UnsupportedError when no variant has WG >= D."""
    fit = sorted((v for v in cands if v.spec["WG"] >= D), key=lambda v: v.spec["WG"])
    if not fit:
        raise UnsupportedError(f"attention_decode: head dim {D} > the largest workgroup "
                               f"({max(v.spec['WG'] for v in cands)} threads)")
    return fit[0] if device_type == "cpu" else fit[-1]


# Stop tokens a sampler launch compares its pick with (hyper[4]; the hyper buffer has room for this many).
MAX_STOPS = 256


def sample_loop_count(cols: int, wg: int) -> int:
    """The most loop iterations one invocation of sample runs over a row of `cols` logits (its sampling path,
    the longer one: 32 top-k and 31 top-p bisection passes, the max, sum, tail, tie and draw passes over its
    share of the row, the workgroup reductions' log2(WG) steps, two prefix sums over WG, the stop tokens)."""
    c = -(-cols // wg)
    red = wg.bit_length()  # a reduction's steps plus its exit test
    return 70 * c + 67 * red + 2 * wg + MAX_STOPS


def pick_sample_wg(cands, device_type: str, cols: int):
    """sample's variant for rows of `cols` logits: on CPU devices the fewest threads whose loop count stays
    within MAX_LOOP, else within the device type's loop cap, else the most threads (the fewest iterations;
    `dispatch` then refuses a launch past the cap): each barrier phase of its reductions costs per thread
    there (at 256 logits 8 threads take half of 64's time or less; at 49,152 greedy 64 beat 256:
    bench/results/sample_bench-lavapipe.txt). The most threads on GPUs."""
    ordered = sorted(cands, key=lambda v: v.spec["WG"])
    if not ordered:
        raise UnsupportedError("no sample kernel is usable on this device")
    if device_type != "cpu":
        return ordered[-1]
    for bound in (MAX_LOOP, DEVICE_LOOP_CAP.get(device_type, MAX_LOOP)):
        fit = [v for v in ordered if sample_loop_count(cols, v.spec["WG"]) <= bound]
        if fit:
            return fit[0]
    return ordered[-1]


# ---- EvermindLM's fused decode step: evermind_layer (train/decode.py ConvDecoder) ------------------------------
# One EvermindLM block (RMSNorm, causal conv from the sequence's conv window, RMSNorm, the shared-expert MoE
# with only the shared and the selected experts computed) for one new token of each sequence, one workgroup a
# sequence (templates/decode_evermind.comp.j2). SW: its shared vec4s (16 KiB); EMAX: the template's bound on
# the experts (its router logits and active-expert lists live in fixed shared arrays). Flag q4: up to 4
# sequences a workgroup (push S), each weight load serving every one of them that uses the weight.
ROWS += [Row("decode_evermind", "evermind_layer", "f32", (("WG", 64), ("SW", 1024)), flags=fl)
         for fl in ((), ("q4",), ("q8",))]
CONV_EMAX = 64


@dataclass(frozen=True)
class ConvLaunch:
    """A decode step of an EvermindLM: its shapes (width d, expert hidden width, experts, top-k, conv taps,
    vocabulary) and the sequences it feeds."""
    d: int
    hidden: int
    experts: int
    top_k: int
    conv_kernel: int
    vocab: int
    items: int = 1
    dtype: str = "f32"

    @property
    def layer_weights(self) -> int:
        """Weight elements one block reads for a token: conv taps, norm gains, router, and the shared and
        top-k experts' w1, b1, w2, b2."""
        d, h = self.d, self.hidden
        return d * self.conv_kernel + 2 * d + self.experts * d + (self.top_k + 1) * (2 * h * d + h + d)


def conv_layer_push(launch: ConvLaunch, items: int, embed: int = 0, head: int = 0, eps: float = 1e-5,
                    ids_at: int = 0, seqs: int = 1) -> dict:
    """evermind_layer's push constants for `items` sequences (embed: the layer reads the embedding rows of the
    ids at word ids_at of hyper instead of x; head: it ends with the tied head's logits; seqs: sequences a
    workgroup)."""
    return dict(R=items, d=launch.d, h=launch.hidden, E=launch.experts, k=launch.top_k, K=launch.conv_kernel,
                V=launch.vocab, embed=int(embed), head=int(head), eps=float(eps), ids_at=int(ids_at), S=int(seqs))


def conv_layer_loop_count(push: dict, wg: int) -> int:
    """The most loop iterations one invocation of evermind_layer runs, all its loops together."""
    c = lambda n: -(-n // wg)  # noqa: E731  a thread's share of n items
    d4, h4, E, k, K = push["d"] // 4, push["h"] // 4, push["E"], push["k"], push["K"]
    red = 2 * (wg.bit_length() + 1) * -(-push["S"] // 4)  # the two norms' reductions (four sequences each)
    head = c(-(-push["V"] // 4)) * (d4 + 1) if push["head"] else 0
    route = 4 * (E + 1) + k * (E + 1) + k + 2  # a thread a sequence: the top-k, the gates, the list; the union
    return (4 * c(d4) + c(d4) * (2 * K + 1) + red + c(E) * (d4 + 1) + route  # norms, conv, router
            + c((k + 1) * h4) * (d4 + 1) + c(d4) * ((k + 1) * (h4 + 1) + 1) + head + 8)  # experts, combine


def conv_shared_vec4s(launch: ConvLaunch) -> int:
    """evermind_layer's shared vec4s a sequence: x, the norm's output, the active experts' hidden rows."""
    return 2 * launch.d // 4 + (launch.top_k + 1) * launch.hidden // 4


def conv_shared_bytes(v) -> int:
    """evermind_layer variant v's shared memory: its SW vec4s, the reduction's WG, and per sequence (seqs_cap:
    flag q4 4, q8 8) the router logits, gates, expert lists and places (EMAX + 3 (EMAX + 1) words), the union list."""
    sq = seqs_cap(v.flags)
    return 16 * (v.spec["SW"] + v.spec["WG"]) + 4 * sq * (CONV_EMAX + 3 * (CONV_EMAX + 1)) + 4 * (CONV_EMAX + 2)


def conv_layer_errors(launch: ConvLaunch, v, device) -> list[str]:
    """Why evermind_layer's variant v cannot run a launch on a device (empty: it can)."""
    why = []
    if launch.dtype != v.dtype:
        why.append(f"evermind_layer computes {v.dtype}, the step is {launch.dtype}")
    if launch.d % 4 or launch.hidden % 4:
        why.append(f"shapes: d {launch.d} and the expert hidden width {launch.hidden} must be multiples of 4 "
                   "(vec4 loads)")
    if not 1 <= launch.top_k <= launch.experts <= CONV_EMAX:
        why.append(f"{launch.experts} experts, top {launch.top_k}: evermind_layer takes 1 <= top_k <= experts "
                   f"<= {CONV_EMAX}")
    return why + _capacity_errors(v, device, conv_layer_loop_count(conv_layer_push(launch, 1, 1), v.spec["WG"]),
                                  conv_shared_vec4s(launch), conv_shared_bytes(v))


_CONV = _Kind("evermind_layer", conv_layer_errors, conv_shared_vec4s,
              lambda launch, v, s: conv_layer_loop_count(conv_layer_push(launch, 1, 1, 1, seqs=s), v.spec["WG"]))
# ---- end of evermind_layer -------------------------------------------------------------------------------------
