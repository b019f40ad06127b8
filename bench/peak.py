#!/usr/bin/env python3
"""The device's own ceilings for our two matmul families, measured with kernels that do nothing else:

  fma   f32 vec4 fused multiply-adds, 16 independent chains per invocation (the register-block
        kernels' instruction: matmul_rb reaches at most this rate)
  mma   16x16x16 cooperative-matrix multiply-adds, f16 A/B and f32 accumulators, FM x FN independent
        accumulators per subgroup (the matmul_cm kernels' instruction and fragment grid)
  smem  the same multiply-adds with every fragment loaded from shared memory each time (SMEM_CASES: the
        cm kernels' feeding without global loads)
  l2    16-byte loads from a buffer small enough to stay in the L2 cache (--l2-mib), every workgroup
        sweeping it from its own starting point, neighbouring workgroups far apart (no L1 reuse): the rate at which
        the multiprocessors together can fetch tiles that are not in their own caches. A matmul tile of
        BM x BN (f16 operands) brings BM*BN/(BM+BN) FLOP per byte fetched, so this rate times that is the
        tile's fetch ceiling.
  dram  the same loads from a buffer far larger than the L2 (--dram-mib, 2048 by default: on an H100, 1 GiB still
        read above the HBM's rate and 2 GiB did not; below 4096: kp 0.9.0 sizes buffers in 32 bits)

No memory traffic inside the fma, mma and smem loops, so each of those rates is what the ALUs / tensor cores
give through this driver and compiler; a matmul kernel's rate over it is that kernel's efficiency. With --torch the same
run measures PyTorch's 4096^3 matmul (cuBLAS, TF32 off, and f16) to give the ceilings as fractions of it.

    python bench/peak.py [--torch]     # compiles into bench/.peak-spv/ first if needed (glslang as codegen finds it)

The shaders are rendered from the strings below (bench-only; not kernels of the library).
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SPV = HERE / ".peak-spv"
WG = 256
MMA_GRIDS = [(2, 2), (4, 2), (2, 4), (4, 4)]


def fma_glsl() -> str:
    xs = [f"x{i}" for i in range(16)]
    init = " ".join(f"vec4 {x} = vec4(float(i) + {k}.0);" for k, x in enumerate(xs))
    step = " ".join(f"{x} = fma({x}, a, b);" for x in xs)
    total = " + ".join(xs)
    return f"""#version 450
layout(local_size_x = {WG}) in;
layout(std430, binding = 0) buffer Out {{ float o[]; }};
layout(push_constant) uniform P {{ uint iters; float a; float b; }} p;
void main() {{
    const uint i = gl_GlobalInvocationID.x;
    {init}
    const vec4 a = vec4(p.a), b = vec4(p.b);
    for (uint t = 0; t < p.iters; ++t) {{ {step} }}
    vec4 s = {total};
    o[i] = s.x + s.y + s.z + s.w;
}}
"""


def mma_glsl(fm: int, fn: int) -> str:
    cm = "coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>"
    lines = []
    for i in range(fm):
        lines.append(f"coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a{i}; "
                     f"coopMatLoad(a{i}, x, {i * 256}, 16, gl_CooperativeMatrixLayoutRowMajor);")
    for j in range(fn):
        lines.append(f"coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b{j}; "
                     f"coopMatLoad(b{j}, x, {(8 + j) * 256}, 16, gl_CooperativeMatrixLayoutRowMajor);")
    acc = [(i, j) for i in range(fm) for j in range(fn)]
    lines += [f"{cm} c{i}_{j} = {cm}(0.0);" for i, j in acc]
    step = " ".join(f"c{i}_{j} = coopMatMulAdd(a{i}, b{j}, c{i}_{j});" for i, j in acc)
    store = "\n    ".join(f"coopMatStore(c{i}_{j}, o, (sg * {fm * fn} + {k}) * 256, 16, gl_CooperativeMatrixLayoutRowMajor);"
                          for k, (i, j) in enumerate(acc))
    body = "\n    ".join(lines)
    return f"""#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = {WG}) in;
layout(std430, binding = 0) readonly buffer In {{ float16_t x[]; }};
layout(std430, binding = 1) writeonly buffer Out {{ float o[]; }};
layout(push_constant) uniform P {{ uint iters; }} p;
void main() {{
    const uint sg = gl_WorkGroupID.x * {WG // 32} + gl_SubgroupID;
    {body}
    for (uint t = 0; t < p.iters; ++t) {{ {step} }}
    {store}
}}
"""


# Fragments from shared memory: the matmul_cm kernels' feeding without global loads. 8 subgroups on a 2x4 grid
# of a 128x128 tile, each FM x FN fragments (64x32 for 4x2, as cm_rb4x2_w2x4), fragments loaded from shared
# rows padded by 8 halves as the kernels do (A: 128 rows of 32 + 8 halves; B: 32 k-rows of 128 + 8, or with
# bcol 128 n-rows of 32 + 8, read column-major), alternating between two 16-wide k slices so the loads stay in
# the loop. elem: the shared array's element type (uvec4 as the kernels, or float16_t). bar: a barrier() every
# iteration (the kernels have one or two per 16-wide k step). nh: the k slice from a hash of the step instead of its
# parity, so that no unrolled copy of the loop reads a fixed address the compiler could hoist out of it (on an
# H100: 570 / 521 TFLOP/s against 590 / 544 with the parity, so the parity cases were not hoisted much).
SMEM_CASES = [("uvec4", False, False), ("float16_t", False, False), ("uvec4", True, False), ("uvec4", False, True),
              ("uvec4", False, False, True), ("uvec4", False, True, True)]
SMEM_GRID = (4, 2)  # FM x FN fragments a subgroup


def smem_glsl(elem: str, bcol: bool, bar: bool, nh: bool = False) -> str:
    fm, fn = SMEM_GRID
    cm = "coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>"
    u = 8 if elem == "uvec4" else 1  # halves per array element
    pa, pb = 40, (40 if bcol else 136)  # row strides in halves
    lines = [f"coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> a{i}; "
             f"coopMatLoad(a{i}, As, ((wm0 + {16 * i}) * {pa} + kk) / {u}, {pa // u}, gl_CooperativeMatrixLayoutRowMajor);"
             for i in range(fm)]
    for j in range(fn):
        off = f"((wn0 + {16 * j}) * {pb} + kk) / {u}" if bcol else f"(kk * {pb} + wn0 + {16 * j}) / {u}"
        lay = "ColumnMajor" if bcol else "RowMajor"
        lines.append(f"coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB> b{j}; "
                     f"coopMatLoad(b{j}, Bs, {off}, {pb // u}, gl_CooperativeMatrixLayout{lay});")
    acc = [(i, j) for i in range(fm) for j in range(fn)]
    init = " ".join(f"{cm} c{i}_{j} = {cm}(0.0);" for i, j in acc)
    step = "\n        ".join(lines + [f"c{i}_{j} = coopMatMulAdd(a{i}, b{j}, c{i}_{j});" for i, j in acc])
    store = "\n    ".join(f"coopMatStore(c{i}_{j}, o, (sg * {fm * fn} + {k}) * 256, 16, gl_CooperativeMatrixLayoutRowMajor);"
                          for k, (i, j) in enumerate(acc))
    zero = "uvec4(0x1400)" if elem == "uvec4" else "float16_t(0.001)"
    na, nb = 128 * pa // u, (128 * pb if bcol else 32 * pb) // u
    return f"""#version 450
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = {WG}) in;
layout(std430, binding = 0) writeonly buffer Out {{ float o[]; }};
layout(push_constant) uniform P {{ uint iters; }} p;
shared {elem} As[{na}];
shared {elem} Bs[{nb}];
void main() {{
    const uint sg = gl_WorkGroupID.x * {WG // 32} + gl_SubgroupID;
    const uint wm0 = (gl_SubgroupID / 4) * 64, wn0 = (gl_SubgroupID % 4) * 32;
    for (uint i = gl_LocalInvocationID.x; i < {na}; i += {WG}) As[i] = {zero};
    for (uint i = gl_LocalInvocationID.x; i < {nb}; i += {WG}) Bs[i] = {zero};
    barrier();
    {init}
    for (uint t = 0; t < p.iters; ++t) {{
        const uint kk = {"((t * 0x9E3779B9u) >> 31)" if nh else "(t & 1)"} * 16;
        {step}{chr(10) + "        barrier();" if bar else ""}
    }}
    {store}
}}
"""


def stream_glsl() -> str:
    """16-byte loads: workgroup g starts at its own offset and sweeps a power-of-two window (mask) in
    coalesced rows of WG uvec4s; the XOR of everything it read is written so nothing is dead code."""
    return f"""#version 450
layout(local_size_x = {WG}) in;
layout(std430, binding = 0) readonly buffer In {{ uvec4 x[]; }};
layout(std430, binding = 1) writeonly buffer Out {{ uint o[]; }};
layout(push_constant) uniform P {{ uint iters; uint mask; uint start; }} p;
void main() {{
    const uint tid = gl_LocalInvocationID.x;
    uint i = gl_WorkGroupID.x * p.start + tid;
    uvec4 s = uvec4(0), r = uvec4(0);
    for (uint t = 0; t < p.iters; t += 2) {{
        s ^= x[i & p.mask];
        r ^= x[(i + {WG}) & p.mask];
        i += {2 * WG};
    }}
    s ^= r;
    o[gl_GlobalInvocationID.x] = s.x ^ s.y ^ s.z ^ s.w;
}}
"""


def smem_name(elem: str, bcol: bool, bar: bool, nh: bool = False) -> str:
    return (f"smem_{SMEM_GRID[0]}x{SMEM_GRID[1]}_{'u4' if elem == 'uvec4' else 'h'}{'_bcol' if bcol else ''}{'_bar' if bar else ''}"
            f"{'_nh' if nh else ''}")


def shaders() -> dict:
    out = {"fma": fma_glsl()}
    out.update({f"mma_{fm}x{fn}": mma_glsl(fm, fn) for fm, fn in MMA_GRIDS})
    out.update({smem_name(*c): smem_glsl(*c) for c in SMEM_CASES})
    out["stream"] = stream_glsl()
    return out


def compile_all() -> None:
    sys.path.insert(0, str(HERE.parent / "tools"))
    from codegen import find_glslang  # the compiler codegen uses
    glslang = find_glslang()
    SPV.mkdir(exist_ok=True)
    for name, src in shaders().items():
        comp = SPV / f"{name}.comp"
        comp.write_text(src)
        proc = subprocess.run([glslang, "-V", "--target-env", "vulkan1.1", "-o", str(SPV / f"{name}.spv"), str(comp)],
                              capture_output=True, text=True)
        if proc.returncode != 0 or "WARNING" in proc.stdout:
            sys.exit(f"peak: {name}: {proc.stdout}{proc.stderr}")
        print(f"compiled {name}")


def timed_rate(mgr, kp, algo, flop: float, reps: int) -> float:
    """FLOP/s of `algo`: the median of 3 timings of a sequence of `reps` dispatches (one submit each)."""
    seq = mgr.sequence()
    for _ in range(reps):
        seq.record(kp.OpAlgoDispatch(algo))
    seq.eval()  # warm-up
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        seq.eval()
        times.append((time.perf_counter() - t0) / reps)
    return flop / statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compile", action="store_true", help="render and compile the shaders into bench/.peak-spv/")
    ap.add_argument("--torch", action="store_true", help="also measure PyTorch 4096^3 matmuls (cuBLAS) in this run")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a few workgroups and iterations (a CPU driver: checks it runs)")
    ap.add_argument("--l2-mib", type=int, default=16, help="the L2 probe's buffer (a power of two; fits the L2)")
    ap.add_argument("--dram-mib", type=int, default=2048, help="the DRAM probe's buffer (a power of two)")
    ap.add_argument("--json", default="peak.json", help="where the run is written (TFLOP/s per kernel; l2 and dram in TB/s)")
    args = ap.parse_args(argv)
    for name, mib in (("l2", args.l2_mib), ("dram", args.dram_mib)):
        if mib < 1 or mib & (mib - 1):
            ap.error(f"--{name}-mib must be a power of two, not {mib}")
        if mib >= 4096:  # kp 0.9.0 sizes buffers in 32 bits: 4 GiB reads as 0 ("attempted to create a zero-sized buffer")
            ap.error(f"--{name}-mib must be below 4096 (kp 0.9.0 cannot make a buffer of 4 GiB or more), not {mib}")
    if args.compile or not all((SPV / f"{n}.spv").exists() for n in shaders()):
        compile_all()
        if args.compile:
            return 0
    import evermind_vk as ev
    from evermind_vk.runtime.device import kp_module
    kp = kp_module()
    dev = ev.get_device()
    mgr = dev.manager
    print(f"# {dev.info.name}")
    groups = 8 if args.quick else 132 * 16  # enough workgroups to fill any current GPU several times over
    rates = {}
    out = mgr.tensor_t(np.zeros(groups * WG, dtype=np.float32), kp.TensorTypes.device)
    iters, mma_iters = (64, 16) if args.quick else (4096, 1024)
    spv = (SPV / "fma.spv").read_bytes()
    push = np.array([iters, 0, 0], dtype=np.uint32)
    push[1:] = np.array([0.999999, 1e-6], dtype=np.float32).view(np.uint32)  # x -> a x + b stays finite
    # kp 0.9.0 picks the push-constant type from the spec-constant dtype: both uint32 here.
    algo = mgr.algorithm([out], spv, [groups, 1, 1], np.zeros(1, dtype=np.uint32), push)
    rates["fma"] = timed_rate(mgr, kp, algo, groups * WG * iters * 16 * 4 * 2.0, args.reps)
    print(f"fma  f32 vec4 FMA              {rates['fma'] / 1e12:9.2f} TFLOP/s")
    if dev.info.coopmat:
        x = mgr.tensor_t(np.full(16 * 256, 0.001, dtype=np.float16).view(np.uint32), kp.TensorTypes.device)
        for fm, fn in MMA_GRIDS:
            name = f"mma_{fm}x{fn}"
            o = mgr.tensor_t(np.zeros(groups * (WG // 32) * fm * fn * 256, dtype=np.float32), kp.TensorTypes.device)
            algo = mgr.algorithm([x, o], (SPV / f"{name}.spv").read_bytes(), [groups, 1, 1],
                                 np.zeros(1, dtype=np.uint32), np.array([mma_iters], dtype=np.uint32))
            flop = groups * (WG // 32) * mma_iters * fm * fn * 2.0 * 16 ** 3
            rates[name] = timed_rate(mgr, kp, algo, flop, args.reps)
            print(f"{name}  16x16x16 f16->f32 MMA       {rates[name] / 1e12:9.2f} TFLOP/s")
        for case in SMEM_CASES:
            name = smem_name(*case)
            frags = SMEM_GRID[0] * SMEM_GRID[1]
            o = mgr.tensor_t(np.zeros(groups * (WG // 32) * frags * 256, dtype=np.float32), kp.TensorTypes.device)
            algo = mgr.algorithm([o], (SPV / f"{name}.spv").read_bytes(), [groups, 1, 1],
                                 np.zeros(1, dtype=np.uint32), np.array([mma_iters], dtype=np.uint32))
            rates[name] = timed_rate(mgr, kp, algo, groups * (WG // 32) * mma_iters * frags * 2.0 * 16 ** 3,
                                     args.reps)
            print(f"{name:22s} fragments from shared  {rates[name] / 1e12:9.2f} TFLOP/s")
    else:
        print("mma: this device has no cooperative matrices")
    # l2 / dram: bytes per second of 16-byte loads; the probe reads the window many times over (iters rows of WG
    # uvec4s a workgroup), so what is measured is cache (l2) or memory (dram) bandwidth, not the first touch.
    out_u = mgr.tensor_t(np.zeros(groups * WG, dtype=np.uint32), kp.TensorTypes.device)
    stream_iters = 64 if args.quick else 2048
    for name, mib in (("l2", args.l2_mib), ("dram", args.dram_mib)):
        n4 = (8 if args.quick else mib) * (1 << 20) // 16
        buf = mgr.tensor_t(np.arange(n4 * 4, dtype=np.uint32), kp.TensorTypes.device)
        # workgroup g starts at row g * S of the window (mod the window: the shader masks, and the product may wrap
        # at 2^32, which the power-of-two window divides), S the odd row count nearest 0.618 of the window's rows.
        # Starts are then all different for up to a window of rows' workgroups, and workgroups with IDs close to
        # each other (running at once, maybe on one multiprocessor) start far apart, so that the L1 does not serve
        # a row one workgroup read to another. Earlier spacings: about 5/13 of the window repeated every 13
        # workgroups (H100: "dram" 7.8 TB/s from 1 GiB, above the HBM's 3.35 TB/s); window / groups put
        # neighbours one row apart in a 16 MiB window (l2 10.4 TB/s against 7.8 with this spacing).
        # With this spacing a 1 GiB window still read 3.8 TB/s on an H100, so some of it came from the L2: the
        # dram window's default is 2 GiB (3.2 TB/s).
        rows = max(1, n4 // WG)
        start = (int(rows * 0.618) | 1) % rows * WG  # below 2^28: windows are under 4 GiB
        algo = mgr.algorithm([buf, out_u], (SPV / "stream.spv").read_bytes(), [groups, 1, 1],
                             np.zeros(1, dtype=np.uint32), np.array([stream_iters, n4 - 1, start], dtype=np.uint32))
        rates[name] = timed_rate(mgr, kp, algo, groups * WG * stream_iters * 16.0, args.reps)
        print(f"{name:5s} 16-byte loads from {n4 * 16 >> 20} MiB  {rates[name] / 1e9:10.1f} GB/s")
        del algo, buf
    for bm, bn in ((128, 128), (128, 256), (256, 256)):
        print(f"      f16 tile {bm}x{bn}: {bm * bn / (bm + bn):.1f} FLOP a byte -> l2 fetch ceiling "
              f"{rates['l2'] * bm * bn / (bm + bn) / 1e12:7.1f} TFLOP/s")
    if args.torch:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        for dt, key in ((torch.float32, "fma"), (torch.float16, None)):
            a = torch.randn(4096, 4096, device="cuda", dtype=dt)
            b = torch.randn(4096, 4096, device="cuda", dtype=dt)
            a @ b
            ts = []
            for _ in range(3):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                for _ in range(10):
                    a @ b
                e1.record()
                torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1) / 1e3 / 10)
            r = 2 * 4096 ** 3 / statistics.median(ts)
            rates[f"torch_{str(dt).split('.')[-1]}_4096"] = r
            ceil = rates.get("fma") if key else max((v for k, v in rates.items() if k.startswith("mma")), default=None)
            frac = f"   our ceiling = {ceil / r:.3f} of it" if ceil else ""
            print(f"torch {str(dt):14s} 4096^3   {r / 1e12:9.2f} TFLOP/s{frac}")
    with open(args.json, "w") as f:
        json.dump({"device": dev.info.name, "tflops": {k: v / 1e12 for k, v in rates.items()}}, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
