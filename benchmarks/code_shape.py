"""The shape of src/finderledge as numbers: largest class and function, private reach-ins, import cycles and
function-level imports, so a refactoring can state before -> after (issue "One engine, a thin facade").

    python benchmarks/code_shape.py [--json] [SRC]

Import cycles count every import: at module level, in ``TYPE_CHECKING`` blocks (a cycle held apart only by
``if TYPE_CHECKING`` is still a cycle in the design), inside functions (a lazy import still needs the other
module), and by name: ``importlib.import_module("pkg.mod")`` or ``import_module(".mod", __package__)`` with a
constant name. Function-level imports (imports inside a function body) are also counted on their own; those of
optional dependencies are unavoidable.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path


def module_name(path: Path, src: Path) -> str:
    """``src/finderledge/ledgers/sqlite.py`` -> ``finderledge.ledgers.sqlite``."""
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    """The absolute module names an ``ImportFrom`` may refer to (the module, and ``module.name`` per name)."""
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    return [target] + [f"{target}.{alias.name}" for alias in node.names]


def imported_by_name(module: str, is_package: bool, call: ast.Call) -> list[str]:
    """The module an ``importlib.import_module(name[, package])`` call imports, when ``name`` is a constant
    (a relative name is resolved against this module's package, as ``__package__`` would)."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called != "import_module" or not call.args:
        return []
    first = call.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
        return []
    name = first.value
    if not name.startswith("."):
        return [name]
    level = len(name) - len(name.lstrip("."))
    node = ast.ImportFrom(module=name[level:] or None, names=[], level=level)
    return resolve(module, is_package, node)[:1]


def scan(src: Path) -> dict:
    """Walk every module under ``src`` once; return the figures."""
    modules: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        modules[module_name(path, src)] = path
    edges: dict[str, set[str]] = {m: set() for m in modules}
    classes: list[tuple[int, str]] = []
    functions: list[tuple[int, str]] = []
    local_imports: list[str] = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.append((node.end_lineno - node.lineno + 1, f"{mod}.{node.name}"))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{mod}:{node.lineno} {node.name}"))
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        local_imports.append(f"{mod}:{inner.lineno}")
        for node in ast.walk(tree):  # every import, wherever it stands (module level, functions, by name)
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = resolve(mod, is_package, node)
                if all(n in modules for n in names[1:]):
                    # `from pkg import sub`: the submodule, like `from pkg.sub import x` (the package's
                    # __init__ runs for both; it is an edge only where a name is taken from it)
                    names = names[1:]
            elif isinstance(node, ast.Call):
                names = imported_by_name(mod, is_package, node)
            for name in names:
                if name in modules and name != mod:
                    edges[mod].add(name)
    return {
        "modules": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules.values()),
        "largest_classes": sorted(classes, reverse=True)[:5],
        "largest_functions": sorted(functions, reverse=True)[:5],
        "function_level_imports": len(local_imports),
        "cycles": strongly_connected(edges),
        "slf001": slf001(src),
    }


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: every group of modules that import each other (directly or around a loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in edges:
        if v not in index:
            visit(v)
    return sorted(groups, key=len, reverse=True)


def slf001(src: Path) -> int:
    """How many private attributes are read across objects (``ruff check --select SLF001``)."""
    done = subprocess.run(
        ["ruff", "check", "--select", "SLF001", "--output-format", "concise", "--exit-zero", str(src)],
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(1 for line in done.stdout.splitlines() if "SLF001" in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", nargs="?", default=str(Path(__file__).resolve().parents[1] / "src"))
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = scan(Path(args.src))
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"modules {figures['modules']}, lines {figures['lines']}")
    print("largest classes:", ", ".join(f"{name} ({n})" for n, name in figures["largest_classes"]))
    print("largest functions:", ", ".join(f"{name} ({n})" for n, name in figures["largest_functions"]))
    print(f"SLF001 (private reach-ins): {figures['slf001']}")
    print(f"function-level imports: {figures['function_level_imports']}")
    print(f"import cycles: {len(figures['cycles'])}")
    for group in figures["cycles"]:
        print(f"  {len(group)} modules: {' <-> '.join(group)}")


if __name__ == "__main__":
    main()
