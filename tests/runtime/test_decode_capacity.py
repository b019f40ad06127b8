"""The fused decode kernels' capacity rule (select.decode._capacity_errors, their one home) at its exact
boundaries: shared vec4s a sequence at the variant's SW run, one more is refused; loop counts at MAX_LOOP
run, one more is refused; and decode_layer's plan at the context that fills SW exactly."""
import dataclasses

import evermind_vk as ev
from evermind_vk.runtime.manifest import usable
from evermind_vk.runtime.select import decode as sd


def test_capacity_boundaries(device):
    dev = ev.get_device()
    for op in ("decode_layer", "mamba1_decode", "evermind_layer", "hybrid_attn_decode"):
        for v in usable(op, "f32", dev):
            SW = v.spec["SW"]
            assert sd._capacity_errors(v, dev, sd.MAX_LOOP, SW) == [], v.name
            why = sd._capacity_errors(v, dev, sd.MAX_LOOP, SW + 1)
            assert len(why) == 1 and f"{SW + 1} vec4s" in why[0], (v.name, why)
            why = sd._capacity_errors(v, dev, sd.MAX_LOOP + 1, SW)
            assert len(why) == 1 and "MAX_LOOP" in why[0], (v.name, why)
            have = dev.info.shared_memory
            assert sd._capacity_errors(v, dev, 1, 1, shared_bytes=have) == []
            assert "shared memory" in sd._capacity_errors(v, dev, 1, 1, shared_bytes=have + 1)[0]


def test_decode_layer_plan_at_exactly_sw(device):
    dev, kn = ev.get_device(), sd.Knobs
    base = sd.Launch(64, 4, 2, 16, 128, 64)
    SW = min(v.spec["SW"] for v in usable("decode_layer", "f32", dev))
    # the context whose score rows fill SW exactly (4 heads of ceil(L / 4) + 1 vec4s beside the vectors)
    L = max(L for L in range(64, 8192) if sd.shared_vec4s(dataclasses.replace(base, max_len=L)) == SW)
    edge = dataclasses.replace(base, max_len=L)
    assert sd.plan(edge, dev, kn("1")).variant is not None
    over = dataclasses.replace(base, max_len=L + 1)
    assert sd.shared_vec4s(over) == SW + 4
    p = sd.plan(over, dev, kn())
    assert p.variant is None and any(f"{SW + 4} vec4s" in w for w in p.why), p.why
