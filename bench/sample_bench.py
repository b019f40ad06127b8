#!/usr/bin/env python3
"""The device sampler (ops.sample) at each workgroup size: ms per launch of one recorded program, greedy and
with temperature + top-k + top-p, for B rows of V logits; interleaved rounds in one process (the median
of 7), and the id each size picked (row 0: a size whose loops pass lavapipe's cap is refused by dispatch).

    python bench/sample_bench.py                      # V = 256 (the CLI's default model), 49,152 (SmolLM2)
    python bench/sample_bench.py --vocab 32000 --batch 1,8
"""
import argparse
import time

import numpy as np

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.ops import decode as dec
from evermind_vk.runtime import kernels
from evermind_vk.runtime.select.decode import sample_loop_count


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vocab", default="256,49152")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    dev = ev.get_device()
    sizes = sorted(v.spec["WG"] for v in kernels.usable("sample", "f32", dev))
    pick = dec.pick_sample_wg
    print(f"sample on {dev.info.name}; workgroup sizes {sizes}; ms per launch, median of {a.rounds} rounds")
    for V in (int(x) for x in a.vocab.split(",")):
        chosen = pick(kernels.usable("sample", "f32", dev), dev.info.type, V).spec["WG"]
        for B in (int(x) for x in a.batch.split(",")):
            for mode, kw in (("greedy", dict(temperature=0.0)), ("top-k 40, top-p 0.9", dict(temperature=0.8, top_k=40, top_p=0.9))):
                progs = {}
                for wg in sizes:
                    dec.pick_sample_wg = lambda cands, t, cols, wg=wg: next(v for v in cands if v.spec["WG"] == wg)
                    logits = ev.tensor(np.random.default_rng(0).standard_normal((B, V)).astype(np.float32))
                    hyper = ev.tensor(dec.hyper_words([(5, b, b, True) for b in range(B)], seed=1, **kw))
                    seen, picked = ev.tensor(np.zeros((B, V), np.uint32)), ev.tensor(np.zeros(2 * B, np.uint32))
                    try:
                        with ev.record() as prog:
                            ops.sample(logits, hyper, seen, picked, B)
                    except ev.UnsupportedError:
                        continue  # past the device's loop cap
                    progs[wg] = (prog, picked)
                dec.pick_sample_wg = pick
                t = {wg: [] for wg in progs}
                for _ in range(a.rounds):
                    for wg, (prog, _) in progs.items():
                        t0 = time.perf_counter()
                        for _ in range(10):
                            prog.run()
                        t[wg].append((time.perf_counter() - t0) / 10 * 1e3)
                cells = "  ".join(f"wg{wg} {np.median(v):7.3f} ({int(progs[wg][1].numpy()[0])})" for wg, v in t.items())
                refused = [wg for wg in sizes if wg not in progs]
                print(f"V={V:6d} B={B} {mode:20s} {cells}  refused {refused}  rule: wg{chosen} "
                      f"(loops {sample_loop_count(V, chosen)})", flush=True)


if __name__ == "__main__":
    main()
