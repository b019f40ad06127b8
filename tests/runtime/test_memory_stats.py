"""Device.memory_allocated / max_memory_allocated / reset_peak_memory_stats: bytes of device buffers held by
live tensors (whole words), a recorded program keeping its intermediates alive."""
import gc

import numpy as np

import evermind_vk as ev
from evermind_vk import ops


def test_counts_live_tensors_and_the_peak(device):
    gc.collect()
    base = device.memory_allocated()
    a = ev.tensor(np.zeros(1000, np.float32))
    h = ev.empty((3,), "f16", device)  # 6 bytes: two words
    assert device.memory_allocated() == base + 4000 + 8
    v = a.reshape(10, 100)  # a view holds no memory of its own
    assert device.memory_allocated() == base + 4008
    device.reset_peak_memory_stats()
    b = ev.empty((2000,), "f32", device)
    del b
    gc.collect()
    assert device.memory_allocated() == base + 4008
    assert device.max_memory_allocated() == base + 4008 + 8000
    del a, h, v
    gc.collect()
    assert device.memory_allocated() == base


def test_a_recorded_program_keeps_its_buffers(device):
    x = ev.tensor(np.ones(256, np.float32))
    gc.collect()
    before = device.memory_allocated()
    with ev.record(device) as prog:
        ops.add(ops.scale(x, 2.0), x)  # two intermediates of 1 KiB, referenced only by the program
    gc.collect()
    assert device.memory_allocated() == before + 2 * 1024
    del prog
    gc.collect()
    assert device.memory_allocated() == before
