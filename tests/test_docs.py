"""The README and docs/ are a manual that works: their code blocks run (or are marked as not runnable, see
docs/README.md, "Code blocks in these pages"), every command-line flag and environment variable is documented,
the generated pages are fresh, and no page is a lab notebook ("round N")."""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from evermind_vk.cli import build_parser
from evermind_vk.runtime import knobs

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*(not-run|run)\s*-->\s*$")


def blocks(path: Path):
    """(language, mark, first line, code) for each fenced block; mark is the `<!-- run -->` / `<!-- not-run -->`
    line right before the fence (blank lines between allowed), else ''."""
    out, lines, i = [], path.read_text(encoding="utf-8").splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = MARK.match(lines[j]).group(1) if j >= 0 and MARK.match(lines[j]) else ""
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        out.append((m.group(1), mark, i + 1, "\n".join(lines[i + 1:end]) + "\n"))
        i = end + 1
    return out


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _env() -> dict:
    """The test's environment with its Python's folder first on PATH (`python3`, `evermind-vk`)."""
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def test_block_parser_reads_marks(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n<!-- not-run -->\n\n```python\nx = 1\n```\n<!-- run -->\n```bash\necho hi\n```\n```text\nz\n```\n")
    assert [(lang, mark) for lang, mark, _, _ in blocks(page)] == [("python", "not-run"), ("bash", "run"), ("text", "")]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_code_blocks_compile(page, tmp_path):
    for lang, _, line, code in blocks(page):
        if lang == "python":
            compile(code, f"{_name(page)}:{line}", "exec")
        elif lang == "bash":
            script = tmp_path / "block.sh"
            script.write_text(code)
            r = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert r.returncode == 0, f"{_name(page)}:{line}: {r.stderr}"


RUNNABLE = [p for p in PAGES if any(lang == "python" and mark != "not-run" for lang, mark, _, _ in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_name)
def test_python_blocks_run(page, tmp_path):
    """A page's runnable python blocks, in order, in one interpreter (like a notebook), from a scratch folder."""
    parts = [f"# {_name(page)}:{line}\n{code}" for lang, mark, line, code in blocks(page)
             if lang == "python" and mark != "not-run"]
    script = tmp_path / "page.py"
    script.write_text("\n".join(parts))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]


RUN_BASH = [(p, line, code) for p in PAGES for lang, mark, line, code in blocks(p) if lang == "bash" and mark == "run"]


@pytest.mark.parametrize("page,line,code", RUN_BASH, ids=[f"{_name(p)}:{n}" for p, n, _ in RUN_BASH])
def test_bash_blocks_marked_run_run(page, line, code):
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"{_name(page)}:{line}: {r.stdout[-2000:]}{r.stderr[-2000:]}"


def _corpus() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES if p.exists())


def _flags(parser: argparse.ArgumentParser, where: str = "evermind-vk"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _flags(sub, f"{where} {name}")
        else:
            for opt in action.option_strings:
                if opt.startswith("--") and opt != "--help":
                    yield where, opt


def test_every_cli_flag_is_documented():
    text = _corpus()
    missing = sorted({f"{where} {opt}" for where, opt in _flags(build_parser())
                      if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", text)})
    assert not missing, "document these flags in README.md or docs/ (python tools/cli_doc.py): " + ", ".join(missing)


def test_every_environment_variable_is_documented():
    text = _corpus()
    missing = [k.name for k in knobs.KNOBS if k.name not in text]
    assert not missing, "document these in evermind_vk/runtime/knobs.py, then python tools/knobs_doc.py: " + \
        ", ".join(missing)


def test_cli_page_is_fresh():
    spec = importlib.util.spec_from_file_location("cli_doc", ROOT / "tools" / "cli_doc.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["--check"]) == 0, "docs/cli.md is stale: run python tools/cli_doc.py"


def test_no_lab_notebook():
    """No session history in the manual: no 'round N' and no 'issue N' in README, CHANGELOG or docs/."""
    found = [f"{_name(p)}:{i}: {line.strip()}" for p in PAGES for i, line in
             enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b[Rr]ound \d+\b|\bround\d+-|\b[Ii]ssue \d+\b", line)]
    assert not found, "\n".join(found)


def test_readme_is_a_manual():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 400
