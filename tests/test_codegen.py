"""The generator: generated/ is fresh, names are mechanical, staleness and warnings fail."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import codegen  # noqa: E402


def test_generated_is_fresh():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "codegen.py"), "--check"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def test_names_are_derived_from_the_table():
    manifest = json.loads((ROOT / "generated" / "manifest.json").read_text())
    names = {v["name"] for v in manifest["variants"]}
    assert "matmul_f16_t64x64" in names and "matmul_f32_t32x32" in names and "add_f32_t256x4" in names
    for v in manifest["variants"]:
        spec = dict(v["spec_constants"])
        tile = (f"t{spec['BM']}x{spec['BN']}" if "BM" in spec else f"t{spec['WG']}x{spec['VEC']}" if "VEC" in spec
                else f"r{spec['ROWS']}x{spec['TILE']}" if "TILE" in spec
                else f"n{spec['TN']}" + (f"m{spec['TM']}" if spec["TM"] > 1 else "") if "TN" in spec  # qgemv
                else f"m{spec['TM']}" if "TM" in spec  # qmatmul: rows of X a thread multiplies per block
                else (f"r{spec['ROWS']}" if spec["ROWS"] > 1 else None) if "ROWS" in spec  # softmax rows a workgroup
                else f"wg{spec['WG']}" if set(spec) == {"WG"} and v["name"].endswith(f"_wg{spec['WG']}")  # CPU row sizes
                else None)
        if "BM" in spec:  # the k-step too where it differs from the algorithm's usual one (cm 16, rb 8)
            usual = (16 if "cm" in v["flags"] else 64 if "cm2" in v["flags"]
                     else 8 if any(f.startswith("rb") for f in v["flags"]) else spec["BK"])
            tile += f"k{spec['BK']}" if spec["BK"] != usual else ""
        assert v["name"] == "_".join([v["op"], v["dtype"], *v["flags"]] + ([tile] if tile else []))
        assert (ROOT / "generated" / v["spirv"]).exists()
    assert len(names) == len(manifest["variants"])


def test_check_fails_on_a_stale_template(tmp_path, monkeypatch):
    tpl = tmp_path / "templates"
    shutil.copytree(ROOT / "templates", tpl)
    (tpl / "binary.comp.j2").write_text((tpl / "binary.comp.j2").read_text().replace("x + y", "y + x"))
    monkeypatch.setattr(codegen, "TEMPLATES", tpl)
    assert codegen.main(["--check"]) == 1


def test_compiler_warning_fails_generation(tmp_path):
    src = tmp_path / "warn.comp"
    src.write_text("#version 450\n#extension GL_EXT_no_such_extension : enable\n"
                   "layout(local_size_x = 1) in;\nvoid main() {}\n")
    with pytest.raises(SystemExit, match="did not compile cleanly"):
        codegen.compile_glsl(codegen.find_glslang(), src, tmp_path / "warn.spv")
