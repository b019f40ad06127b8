#!/usr/bin/env python3
"""The matmul path of attention, product by product: every matmul variant of a kind forced in turn
(EVERMIND_VK_MATMUL_VARIANT) and the selector's own pick ("auto"), GPU ms per product from a serialized
profile (runtime/profiler.py: a barrier before every dispatch) of one recorded forward + backward.

    python bench/attention_products.py --batch 16 --seq 256 --heads 8 4 --hd 64          # the 23.7M LM's
    python bench/attention_products.py --batch 1 --seq 1024 2048 4096 --heads 4 2 --hd 64 128
    python bench/attention_products.py --batch 1 --seq 2048 --heads 4 2 --hd 128 --only zzz --split 1 2 4 8

Products (ops/attention.py): scores = Q K^T (causal: lower_c), pv = P V (lower_a), dp = dO V^T (lower_c),
dq = dS K (lower_a), then dk = dS^T Q and dv = P^T dO (upper_a) once per member of a kv-head group. The
causal *_a products may run in K chunks (variants.tri_split; --split forces counts through
EVERMIND_VK_TRI_SPLIT): a product's time is then its chunks' sum, and "sums" the column sums that add
them. The summary gives, per product, the fastest variant against auto.
"""
import argparse
import os

import numpy as np

import evermind_vk as ev
from evermind_vk import ops
from evermind_vk.runtime import kernels, variants

KINDS = {"f32": "rb", "f16": "cm"}


def product_names(G: int, launches: int) -> list[str]:
    """The product of each matmul launch, in order: w chunks of each *_a product (w from the count)."""
    w, rest = divmod(launches - 2, 2 + 2 * G)
    if rest or w < 1:
        raise SystemExit(f"{launches} matmul launches are not 2 + (2 + 2G) w for G = {G} (batch chunks?)")
    return ["scores"] + ["pv"] * w + ["dp"] + ["dq"] * w + ["dk"] * (G * w) + ["dv"] * (G * w)


def one_step(tq, tk, tv, tdo, B, repeats):
    """{product: ms}, {product: variant}, the step's serialized GPU ms."""
    with ev.record(run=False) as prog:
        o, saved = ops.attention(tq, tk, tv, causal=True, batch=B)
        ops.attention_backward(tq, tk, tv, tdo, saved, causal=True, batch=B, out=o)
    prog.run()  # warm-up
    prof = ev.profile(prog, repeats=repeats, serialize=True)
    mm = [(name, ms) for name, ms in prof.per_op_ms if name.startswith("matmul")]
    names = product_names(tq.shape[1] // tk.shape[1], len(mm))
    ms, picked = {}, {}
    for n, (v, t) in zip(names, mm):
        ms[n] = ms.get(n, 0.0) + t
        picked[n] = v
    ms["sums"] = sum(t for name, t in prof.per_op_ms if name.startswith("colsum"))
    return ms, picked, prof.gpu_ms


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, nargs="+", default=[256])
    ap.add_argument("--heads", type=int, nargs=2, default=[8, 4], metavar=("H", "KVH"))
    ap.add_argument("--hd", type=int, nargs="+", default=[64])
    ap.add_argument("--dtype", choices=["f32", "f16"], default="f32")
    ap.add_argument("--only", default="", help="forced variants whose name contains this")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--split", nargs="+", default=[""], help="EVERMIND_VK_TRI_SPLIT values to run (default: the rule)")
    args = ap.parse_args(argv)
    os.environ["EVERMIND_VK_ATTENTION"] = "matmul"
    dev = ev.get_device()
    print(f"# {dev.info.name} ({dev.info.type}); attention matmul path, causal, {args.dtype}, serialized profile, "
          f"median of {args.repeats}")
    kind = KINDS[args.dtype] if dev.info.type != "cpu" else None
    cands = [v.name for v in kernels.usable("matmul", args.dtype, dev)
             if (kind is None or variants.matmul_kind(v.flags) == kind) and "c32" not in v.flags
             and args.only in v.name]
    H, KVH = args.heads
    npdt = np.float16 if args.dtype == "f16" else np.float32
    rng = np.random.default_rng(1)
    for D in args.hd:
        for S in args.seq:
            B = args.batch
            tq, tk, tv, tdo = (ev.tensor(rng.standard_normal(shape).astype(npdt))
                               for shape in ((B * S, H, D), (B * S, KVH, D), (B * S, KVH, D), (B * S, H, D)))
            print(f"## B={B} S={S} H={H} KVH={KVH} hd={D}")
            results = {}
            for split in args.split:
                os.environ["EVERMIND_VK_TRI_SPLIT"] = split
                if split:
                    print(f"  EVERMIND_VK_TRI_SPLIT={split}")
                for forced in ["auto"] + cands:
                    if forced == "auto":
                        os.environ.pop("EVERMIND_VK_MATMUL_VARIANT", None)
                    else:
                        os.environ["EVERMIND_VK_MATMUL_VARIANT"] = forced
                    ms, picked, total = one_step(tq, tk, tv, tdo, B, args.repeats)
                    results[forced] = (ms, picked)
                    cells = "  ".join(f"{n} {t:7.3f}" for n, t in ms.items())
                    print(f"  {forced:<36} {cells}  | products {sum(ms.values()):7.3f}  step {total:7.3f} ms")
            os.environ.pop("EVERMIND_VK_TRI_SPLIT", None)
            os.environ.pop("EVERMIND_VK_MATMUL_VARIANT", None)
            auto_ms, auto_v = results["auto"]
            best_sum = 0.0
            for n in (n for n in auto_ms if n != "sums"):
                best = min(((r[0][n], f) for f, r in results.items() if f != "auto" and r[1][n] == f), default=None)
                if best is None:
                    continue
                best_sum += best[0]
                print(f"  best {n:<6} {best[1]:<36} {best[0]:7.3f} ms  auto {auto_v[n]:<36} {auto_ms[n]:7.3f} ms "
                      f"({auto_ms[n] / best[0]:.2f}x)")
            print(f"  products: auto {sum(auto_ms.values()):.3f} ms, best per product {best_sum:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
