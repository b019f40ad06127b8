"""One table of knobs: every EVERMIND_VK_* variable is declared once in evermind_vk/runtime/knobs.py, read only
through knobs.get, and docs/knobs.md is generated from the declarations."""
import ast
import importlib.util
import re
from pathlib import Path

import pytest

from evermind_vk.errors import ConfigError
from evermind_vk.runtime import knobs

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"EVERMIND_VK_[A-Z0-9_]+")


def _env_reads(tree: ast.AST):
    """(line, what) for each read of one of our variables from the environment: os.environ.get / os.getenv /
    environ[...] / any .get(...) of an EVERMIND_VK_ literal, and os.environ.get / os.getenv of a non-literal."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant) \
                and NAME.fullmatch(str(node.slice.value)):
            yield node.lineno, ast.unparse(node)
        if not isinstance(node, ast.Call) or not node.args:
            continue
        attr = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if attr not in ("get", "getenv"):
            continue
        func, arg = ast.unparse(node.func), node.args[0]
        literal = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
        if func in ("knobs.get", "knobs.knob"):
            continue
        if literal and NAME.fullmatch(arg.value) and (func.endswith(".get") or func.endswith("getenv")):
            yield node.lineno, ast.unparse(node)
        elif not literal and func in ("os.environ.get", "os.getenv", "environ.get", "getenv"):
            yield node.lineno, ast.unparse(node)


def test_nothing_but_knobs_reads_our_variables():
    found = []
    for path in sorted((ROOT / "evermind_vk").rglob("*.py")):
        if path.name == "knobs.py" and path.parent.name == "runtime":
            continue
        for line, what in _env_reads(ast.parse(path.read_text(encoding="utf-8"))):
            found.append(f"{path.relative_to(ROOT)}:{line}: {what}")
    assert not found, "read these through evermind_vk.runtime.knobs.get:\n" + "\n".join(found)


def test_the_grep_finds_a_planted_read():
    planted = 'import os\nx = os.environ.get("EVERMIND_VK_DEVICE", "")\ny = os.getenv(name)\nz = env.get("EVERMIND_VK_X")\n' \
              'w = os.environ["EVERMIND_VK_Y"]\nenv["EVERMIND_VK_DEVICE"] = "0"\nv = knobs.get("EVERMIND_VK_DEVICE")\n'
    assert len(list(_env_reads(ast.parse(planted)))) == 4


def test_every_variable_named_anywhere_is_declared():
    names = set()
    for top in ("evermind_vk", "tools", "bench", "ci", "tests"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and path.suffix in (".py", ".sh") and path.name != "test_knobs.py":
                names |= set(NAME.findall(path.read_text(encoding="utf-8", errors="replace")))
    assert names <= set(knobs.BY_NAME), sorted(names - set(knobs.BY_NAME))
    assert len(knobs.BY_NAME) == len(knobs.KNOBS)  # each declared once


def test_declarations_are_complete():
    for k in knobs.KNOBS:
        assert k.type in knobs.TYPES and k.meaning.strip() and k.group and k.scope in ("package", "bench", "tests"), k
        assert (k.type == "choice") == bool(k.choices), k


def test_parsing(monkeypatch):
    monkeypatch.delenv("EVERMIND_VK_DISABLE_F16", raising=False)
    assert knobs.get("EVERMIND_VK_DISABLE_F16") is False
    for raw, want in (("1", True), ("yes", True), ("0", False), (" 0 ", False), ("", False)):
        monkeypatch.setenv("EVERMIND_VK_DISABLE_F16", raw)
        assert knobs.get("EVERMIND_VK_DISABLE_F16") is want, raw
    assert knobs.get("EVERMIND_VK_NORM_MULTI", {}) is True
    assert knobs.get("EVERMIND_VK_NORM_MULTI", {"EVERMIND_VK_NORM_MULTI": "0"}) is False
    assert knobs.get("EVERMIND_VK_ROW_WG", {"EVERMIND_VK_ROW_WG": "32"}) == 32
    assert knobs.get("EVERMIND_VK_DIST_TIMEOUT", {}) == 60.0
    assert knobs.get("EVERMIND_VK_DIST_TIMEOUT", {"EVERMIND_VK_DIST_TIMEOUT": "7.5"}) == 7.5
    assert knobs.get("EVERMIND_VK_ATTENTION", {"EVERMIND_VK_ATTENTION": " Fused "}) == "fused"
    with pytest.raises(ConfigError, match="EVERMIND_VK_ROW_WG"):
        knobs.get("EVERMIND_VK_ROW_WG", {"EVERMIND_VK_ROW_WG": "-3"})
    with pytest.raises(ConfigError, match="EVERMIND_VK_DIST_TIMEOUT"):
        knobs.get("EVERMIND_VK_DIST_TIMEOUT", {"EVERMIND_VK_DIST_TIMEOUT": "soon"})
    with pytest.raises(ConfigError, match="not an evermind-vk variable"):
        knobs.get("EVERMIND_VK_NO_SUCH_THING")


def test_docs_table_is_fresh():
    spec = importlib.util.spec_from_file_location("knobs_doc", ROOT / "tools" / "knobs_doc.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--check"]) == 0, "docs/knobs.md is stale: run python tools/knobs_doc.py"
    text = (ROOT / "docs" / "knobs.md").read_text(encoding="utf-8")
    assert all(f"`{k.name}`" in text for k in knobs.KNOBS)
