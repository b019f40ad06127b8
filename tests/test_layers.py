"""The package's layer rules, read from the import graph with `ast` (nothing is imported or run):

  runtime   imports nothing of evermind_vk but errors
  ops       runtime
  autodiff  ops, runtime
  models    autodiff, ops, runtime
  train     models, autodiff, ops, runtime, io
  io        nothing of evermind_vk but errors (formats, never models or train)
  top level (cli, files, __init__, __main__) may join any of them

and: no import cycles between modules; no module imports another package's `_private` name or
module; function-local imports only for the optional dependencies below; no module or package is
named after a standard-library module. `test_planted_violations_are_found` shows the checker fails."""
import ast
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = "evermind_vk"
ALLOWED = {
    "errors": set(),
    "runtime": {"errors"},
    "ops": {"errors", "runtime"},
    "autodiff": {"errors", "runtime", "ops"},
    "models": {"errors", "runtime", "ops", "autodiff"},
    "train": {"errors", "runtime", "ops", "autodiff", "models", "io"},
    "io": {"errors"},
}
# Imported inside functions on purpose: optional extras, or kp (required, imported late so a missing or
# unpatched build raises a typed DeviceError instead of failing `import evermind_vk`).
LATE_OK = {"kp", "torch", "matplotlib", "tqdm", "filelock", "mpi4py"}
# `evermind_vk.io` is the layout's name for the formats layer; it is only ever imported qualified, and the
# interpreter has imported the standard io before any path entry is consulted. `evermind_vk.runtime.select`
# (the kernel families' selection rules) likewise: only imported qualified or relatively, never as `select`.
STDLIB_NAME_OK = {"io", "select"}


def _modules(pkg_dir: Path) -> dict[str, Path]:
    out = {}
    for p in pkg_dir.rglob("*.py"):
        if "generated" in p.relative_to(pkg_dir).parts:
            continue
        parts = list(p.relative_to(pkg_dir.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def _imports(mod: str, path: Path, mods: dict):
    """(target module, imported names, line, function-local?) for each import of evermind_vk modules or others."""
    tree = ast.parse(path.read_text(), str(path))
    is_pkg = path.name == "__init__.py"
    local_nodes = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    local_nodes.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, [], node.lineno, id(node) in local_nodes
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, is_pkg, node.level, node.module)
            names = [a.name for a in node.names]
            yield target, names, node.lineno, id(node) in local_nodes
            for n in names:  # `from pkg import submodule`
                if f"{target}.{n}" in mods:
                    yield f"{target}.{n}", [], node.lineno, id(node) in local_nodes


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    if len(parts) < 2:
        return None
    return parts[1] if parts[1] in ALLOWED else None


def layer_violations(pkg_dir: Path) -> list[str]:
    mods = _modules(pkg_dir)
    problems, graph = [], {m: set() for m in mods}
    stdlib = set(sys.stdlib_module_names)
    for mod, path in mods.items():
        name = mod.rsplit(".", 1)[-1]
        if name in stdlib and name not in STDLIB_NAME_OK:
            problems.append(f"{mod}: named after the standard-library module {name!r}")
        src_layer = _layer(mod)
        for target, names, line, local in _imports(mod, path, mods):
            where = f"{path.relative_to(pkg_dir.parent)}:{line}"
            inside = target == PKG or target.startswith(PKG + ".")
            if local and target.split(".")[0] not in LATE_OK:
                problems.append(f"{where}: function-local import of {target} (only optional dependencies may be late)")
            if not inside:
                continue
            if target in mods and not local and target != mod and not mod.startswith(target + "."):  # ancestors load first anyway
                graph[mod].add(target)
            dst_layer = _layer(target)
            if src_layer is not None and dst_layer is not None and dst_layer != src_layer \
                    and dst_layer not in ALLOWED[src_layer]:
                problems.append(f"{where}: {src_layer} imports {dst_layer} ({target})")
            if src_layer is not None and target == PKG:
                for n in names:
                    if n in ALLOWED and n != src_layer and n not in ALLOWED[src_layer]:
                        problems.append(f"{where}: {src_layer} imports {n}")
            other_pkg = target.split(".")[:2] != mod.split(".")[:2]
            private = [p for p in target.split(".") if p.startswith("_") and not p.startswith("__")]
            private += [n for n in names if n.startswith("_") and not n.startswith("__")]
            if other_pkg and private:
                problems.append(f"{where}: imports another package's private {', '.join(private)} from {target}")
    # cycles among module-level imports
    state: dict[str, int] = {}

    def visit(m, stack):
        state[m] = 1
        for t in sorted(graph.get(m, ())):
            if state.get(t) == 1:
                problems.append("import cycle: " + " -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                visit(t, stack + [t])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return problems


def test_layers_hold():
    assert layer_violations(ROOT / PKG) == []


def test_planted_violations_are_found(tmp_path):
    pkg = tmp_path / PKG
    shutil.copytree(ROOT / PKG, pkg, ignore=shutil.ignore_patterns("__pycache__", "generated"))
    with open(pkg / "ops" / "matmul.py", "a") as f:
        f.write("\nfrom ..train import Trainer\n")                       # ops reaching up
    with open(pkg / "io" / "package.py", "a") as f:
        f.write("\nfrom ..models import TransformerLM\n")                # io knowing a model
    with open(pkg / "runtime" / "select" / "loops.py", "a") as f:
        f.write("\nfrom ..kernels import grid\n")                        # kernels -> select.loops -> kernels
    with open(pkg / "train" / "optim.py", "a") as f:
        f.write("\nfrom ..ops._util import per_thread\n")                # another package's private module
    with open(pkg / "models" / "config.py", "a") as f:
        f.write("\ndef late():\n    import json\n    return json\n")       # a hidden dependency
    (pkg / "runtime" / "signal.py").write_text("")                        # shadows the standard library
    found = "\n".join(layer_violations(pkg))
    for needle in ("ops imports train", "io imports models", "import cycle: evermind_vk.runtime.kernels",
                   "private _util", "function-local import of json", "standard-library module 'signal'"):
        assert needle in found, (needle, found)
