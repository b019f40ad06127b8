"""The wheel carries every subpackage and the generated SPIR-V + manifest (no compiler needed to run)."""
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_contents(tmp_path):
    # Build from a clean copy: a stale build/ directory must not hide a missing package.
    src_tree = tmp_path / "src"
    src_tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src_tree / name)
    for name in ("evermind_vk", "generated"):
        shutil.copytree(ROOT / name, src_tree / name, ignore=shutil.ignore_patterns("__pycache__"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path), str(src_tree)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (whl,) = tmp_path.glob("evermind_vk-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    src = {str(p.relative_to(ROOT)).replace("\\", "/") for p in (ROOT / "evermind_vk").rglob("*.py")}
    assert src <= names, sorted(src - names)
    manifest = json.loads((ROOT / "generated" / "manifest.json").read_text())
    for v in manifest["variants"]:
        assert "evermind_vk/generated/" + v["spirv"] in names
    assert "evermind_vk/generated/manifest.json" in names
