"""Golden selections: every kernel launch (variant, workgroups, push constants) one training step of each LM
type makes, on three capability sets, equals what tests/runtime/fixtures/selections.json recorded.

The steps run on the local device dressed as each capability set (as bench/matmul_selection.py does) with
`kernels.dispatch` replaced by a recorder, so nothing executes and the selection rules alone decide:
  lavapipe  Mesa's CPU device (its features and limits as Mesa 22.3 reports them)
  h200      an NVIDIA H200: KHR cooperative matrices, NV cooperative_matrix2 with the driver's flexible
            shapes, f16, 48 KiB of shared memory, 132 multiprocessors
  khr       a GPU with KHR cooperative matrices and f16 but no cooperative_matrix2, multiprocessors unknown
A launch is compared as a multiset (order-free) of "variant groups push" lines per step, so a change to the
selection rules (a tile, a split, a variant, a workgroup count) fails here, while the order of independent
launches does not matter. Regenerate after an intended change with
`python tests/runtime/test_selections.py` and say why in the commit.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "selections.json"

FEATURES_CPU = {"shader_int16": True, "shader_int64": True, "storage_buffer_16bit_access": True,
                "shader_float16": True, "vulkan_memory_model": True, "vulkan_memory_model_device_scope": True,
                "cooperative_matrix": False, "cooperative_matrix2": False, "coopmat_f16_16x16x16_f32": False,
                "subgroup_size_32": False, "subgroup_broadcast_8": True,
                "subgroup_arithmetic_8": True}
GPU_KHR = dict(FEATURES_CPU, cooperative_matrix=True, coopmat_f16_16x16x16_f32=True, subgroup_size_32=True,
               subgroup_broadcast_8=False, subgroup_arithmetic_8=False)
# The H200's VK_NV_cooperative_matrix2 shapes of f16 x f16 -> f32 at workgroup scope (driver 580: ci/patches/0011).
H200_FLEXIBLE = ((32, 16, 16, 0, 0, 1, 1, 2, 128), (32, 32, 16, 0, 0, 1, 1, 2, 256))

CAPSETS = {
    "lavapipe": dict(type="cpu", subgroup_size=8, shared_memory=32768, multiprocessors=0, features=FEATURES_CPU,
                     cooperative_matrix_flexible_shapes=(), max_per_stage_descriptor_storage_buffers=32,
                     max_descriptor_set_storage_buffers=256, max_per_stage_resources=128),
    "h200": dict(type="discrete_gpu", subgroup_size=32, shared_memory=49152, multiprocessors=132,
                 features=dict(GPU_KHR, cooperative_matrix2=True), cooperative_matrix_flexible_shapes=H200_FLEXIBLE,
                 max_per_stage_descriptor_storage_buffers=2 ** 20, max_descriptor_set_storage_buffers=2 ** 20,
                 max_per_stage_resources=2 ** 20),
    "khr": dict(type="discrete_gpu", subgroup_size=32, shared_memory=49152, multiprocessors=0, features=GPU_KHR,
                cooperative_matrix_flexible_shapes=(), max_per_stage_descriptor_storage_buffers=2 ** 20,
                max_descriptor_set_storage_buffers=2 ** 20, max_per_stage_resources=2 ** 20),
}

# (model, precision, batch, seq_len): the 23.7M TransformerLM of bench/train_bench.py, a small EvermindLM and a
# HybridMamba with every layer type.
STEPS = (("transformer-23.7m", "f32", 16, 256), ("transformer-23.7m", "f16", 16, 256),
         ("transformer-tiny", "f32", 8, 128), ("evermind", "f32", 4, 64), ("mamba", "f32", 2, 128))

ENV = ("EVERMIND_VK_MATMUL_SPLIT_K", "EVERMIND_VK_MATMUL_VARIANT", "EVERMIND_VK_ATTENTION",
       "EVERMIND_VK_ATTENTION_VARIANT", "EVERMIND_VK_TRI_SPLIT", "EVERMIND_VK_ROW_WG", "EVERMIND_VK_SOFTMAX_ROWS",
       "EVERMIND_VK_NORM_BLOCK_ROWS", "EVERMIND_VK_RANK_LANES", "EVERMIND_VK_EMBEDDING_BACKWARD",
       "EVERMIND_VK_NORM_MULTI")


def _model(name: str):
    from evermind_vk.models import EvermindLM, HybridMambaModel, LMConfig, TransformerLM
    from evermind_vk.models.evermind_lm import EvermindLMConfig
    from evermind_vk.models.mamba import HybridMambaConfig
    if name == "transformer-23.7m":
        return TransformerLM(LMConfig(d_model=512, n_layers=8, n_heads=8, n_kv_heads=4, d_ff=1408, max_seq_len=256))
    if name == "transformer-tiny":
        return TransformerLM(LMConfig(d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=352, max_seq_len=128))
    if name == "evermind":
        return EvermindLM(EvermindLMConfig(vocab_size=256, d_model=64, num_layers=2))
    return HybridMambaModel(HybridMambaConfig(vocabSize=256, dModel=64, numLayers=4, nHeads=4, chunkLen=64,
                                              layers=("mamba1", "mamba2", "mamba3", "attention")))


def _line(v, push: dict, groups) -> str:
    return f"{v.name} {tuple(int(g) for g in groups)} " + json.dumps({k: push[k] if isinstance(push[k], (int, float))
                                                                       else int(push[k]) for k in sorted(push)})


def record_step(device, capset: str, step: tuple, setattr_) -> dict[str, int]:
    """The launches of one training step on `device` dressed as `capset`: {line: count}. setattr_ patches an
    attribute for the step's duration (pytest's monkeypatch.setattr, or a plain one that the caller undoes)."""
    from evermind_vk.errors import EvermindError
    from evermind_vk.runtime import kernels
    from evermind_vk.train import EvermindLMTrainer, Trainer
    name, precision, B, L = step
    setattr_(device, "info", dataclasses.replace(device.info, **CAPSETS[capset]))
    seen = collections.Counter()
    setattr_(kernels, "dispatch", lambda v, tensors, push, groups, *rest: seen.update([_line(v, push, groups)]))
    model = _model(name)
    rng = np.random.default_rng(0)
    try:
        if name == "evermind":  # builderforce's trainer: B sequences of L tokens, one accumulated step
            EvermindLMTrainer(model, epochs=1, accum_steps=B).fit(
                [list(map(int, rng.integers(0, 256, L))) for _ in range(B)])
        else:
            ids = rng.integers(0, model.config.vocab_size, B * L * 2 + 2)
            Trainer(model, precision=precision).train(ids, epochs=1, seq_len=L, batch_size=B, max_steps=1)
    except EvermindError as e:  # nothing ran: the loss read back is whatever the buffer held
        if "loss became" not in str(e) and "non-finite" not in str(e):
            raise
    return dict(sorted(seen.items()))


def _key(capset: str, step: tuple) -> str:
    return f"{capset}/{step[0]}/{step[1]}/b{step[2]}x{step[3]}"


def _fixture() -> dict:
    return json.loads(FIXTURE.read_text())


@pytest.mark.parametrize("capset", sorted(CAPSETS))
@pytest.mark.parametrize("step", STEPS, ids=lambda s: f"{s[0]}-{s[1]}")
def test_selections_match_the_recorded_ones(device, monkeypatch, capset, step):
    """One step's launches on a capability set equal the recorded ones, line for line and count for count."""
    for var in ENV:
        monkeypatch.delenv(var, raising=False)
    want = _fixture()[_key(capset, step)]
    got = record_step(device, capset, step, monkeypatch.setattr)
    missing = {k: n for k, n in want.items() if got.get(k) != n}
    extra = {k: n for k, n in got.items() if want.get(k) != n}
    assert not missing and not extra, (f"{_key(capset, step)}: launches changed\n  recorded, now different or gone: "
                                       + "\n    ".join(list(missing)[:8]) + "\n  new: " + "\n    ".join(list(extra)[:8]))


def test_fixture_covers_every_family():
    """The recorded launches include each kernel family the selectors decide on, on each capability set."""
    data = _fixture()
    for capset in CAPSETS:
        ops = {line.split()[0] for k, step in data.items() if k.startswith(capset + "/") for line in step}
        rows = "softmax" if capset != "lavapipe" else "attention_"  # lavapipe runs attention fused
        for prefix in ("matmul_f32", "matmul_f16", rows, "rms_norm", "cross_entropy", "scan_chunk", "ssd_output",
                       "cscan_carry", "cssd_output", "embedding"):
            assert any(o.startswith(prefix) for o in ops), (capset, prefix)
    h200 = {line.split()[0] for k, s in data.items() if k.startswith("h200/") for line in s}
    khr = {line.split()[0] for k, s in data.items() if k.startswith("khr/") for line in s}
    assert any("_cm2_" in o for o in h200) and any("_cm_" in o for o in khr) and not any("_cm2_" in o for o in khr)
    cpu = {line.split()[0] for k, s in data.items() if k.startswith("lavapipe/") for line in s}
    assert any("_v4_" in o for o in cpu) and any(o.startswith("attention_") for o in cpu)


def main() -> None:
    """Record every (capability set, step) from the current code into the fixture."""
    import evermind_vk as ev
    device = ev.get_device()
    real = device.info
    from evermind_vk.runtime import kernels
    dispatch = kernels.dispatch
    out = {}
    for capset in sorted(CAPSETS):
        for step in STEPS:
            try:
                out[_key(capset, step)] = record_step(device, capset, step, setattr)
            finally:
                device.info, kernels.dispatch = real, dispatch
            print(_key(capset, step), sum(out[_key(capset, step)].values()), "launches", file=sys.stderr)
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(out, indent=0, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
