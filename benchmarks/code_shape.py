"""The shape of src/finderledge as numbers: largest class (alone and counted with its bases) and function,
private reach-ins, import cycles, import-graph depth and function-level imports, so a refactoring can state
before -> after (issues "One engine, a thin facade" and 40).

    python benchmarks/code_shape.py [--json] [SRC]

The import graph holds every import: module-level ones, ``TYPE_CHECKING`` blocks (a cycle held apart only by
``if TYPE_CHECKING`` is still a cycle in the design), imports inside functions and imports by name
(``importlib.import_module("..facade", __package__)`` with a literal name). Cycles are its strongly connected
groups, and its depth is the number of modules on the longest chain of imports (a cycle counted as one step,
so a new cycle can shorten it); both are given without and with the imports by name. Function-level imports are imports inside a function body; those of optional dependencies are unavoidable, the
rest are cycles in disguise. A class counted with its bases adds the lines of every base class defined under
``SRC`` (and theirs), so a class cut into bases to fit a line count is measured whole.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
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


def by_name(module: str, is_package: bool, node: ast.Call) -> str | None:
    """The absolute module an ``import_module("name"[, __package__])`` call with a literal name imports."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    if called != "import_module" or not node.args:
        return None
    name = node.args[0]
    if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
        return None
    package = module if is_package else module.rpartition(".")[0]
    try:
        return importlib.util.resolve_name(name.value, package)
    except ImportError:  # more leading dots than packages
        return None


def imported_names(module: str, is_package: bool, tree: ast.Module) -> dict[str, str]:
    """``{local name: absolute dotted name}`` of every ``from X import name [as alias]`` in the module."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = resolve(module, is_package, node)[0]
            for alias in node.names:
                names[alias.asname or alias.name] = f"{target}.{alias.name}"
    return names


def base_name(node: ast.expr) -> str | None:
    """The name a base class expression refers to (``Base``, ``pkg.Base``, ``Generic[T]`` -> ``Generic``)."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = base_name(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def with_bases(classes: dict[str, tuple[int, list[str]]]) -> list[tuple[int, str, list[str]]]:
    """Each class's lines plus those of all its bases defined under ``src`` (each counted once), largest first,
    with the bases counted."""
    counted = []
    for name, (lines, _) in classes.items():
        seen: list[str] = []
        todo = list(classes[name][1])
        while todo:
            base = todo.pop(0)
            if base in classes and base not in seen and base != name:
                seen.append(base)
                todo.extend(classes[base][1])
        counted.append((lines + sum(classes[b][0] for b in seen), name, seen))
    return sorted(counted, reverse=True)


def depth(edges: dict[str, set[str]]) -> tuple[int, list[str]]:
    """The longest chain of imports, in modules (a cycle's modules count as one step, named by its first
    module and its size), and one such chain."""
    group_of = {m: (m,) for m in edges}
    for group in strongly_connected(edges):
        for m in group:
            group_of[m] = tuple(group)
    after: dict[tuple[str, ...], set[tuple[str, ...]]] = {g: set() for g in group_of.values()}
    for m, targets in edges.items():
        after[group_of[m]].update(group_of[n] for n in targets if group_of[n] != group_of[m])
    longest: dict[tuple[str, ...], list[tuple[str, ...]]] = {}

    def chain(g: tuple[str, ...]) -> list[tuple[str, ...]]:
        if g not in longest:
            longest[g] = [g, *max((chain(n) for n in sorted(after[g])), key=len, default=[])]
        return longest[g]

    best = max((chain(g) for g in sorted(after)), key=len, default=[])
    return len(best), [g[0] if len(g) == 1 else f"{g[0]} (+{len(g) - 1} in a cycle)" for g in best]


def scan(src: Path) -> dict:
    """Walk every module under ``src`` once; return the figures."""
    modules: dict[str, Path] = {}
    for path in sorted(src.rglob("*.py")):
        modules[module_name(path, src)] = path
    edges: dict[str, set[str]] = {m: set() for m in modules}
    named: dict[str, set[str]] = {m: set() for m in modules}  # imports by name
    classes: list[tuple[int, str]] = []
    class_bases: dict[str, tuple[int, list[str]]] = {}
    functions: list[tuple[int, str]] = []
    local_imports: list[str] = []
    by_name_imports: list[str] = []
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        is_package = path.name == "__init__.py"
        local = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
        imported = imported_names(mod, is_package, tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                lines = node.end_lineno - node.lineno + 1
                classes.append((lines, f"{mod}.{node.name}"))
                bases = [base_name(b) for b in node.bases]
                class_bases[f"{mod}.{node.name}"] = (
                    lines,
                    [
                        f"{mod}.{b}"
                        if b in local
                        else imported.get(b.split(".")[0], b) + b[len(b.split(".")[0]) :]
                        for b in bases
                        if b
                    ],
                )
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append((node.end_lineno - node.lineno + 1, f"{mod}:{node.lineno} {node.name}"))
                for inner in ast.walk(node):
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        local_imports.append(f"{mod}:{inner.lineno}")
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Call) and (target := by_name(mod, is_package, node)):
                if target in modules and target != mod:
                    by_name_imports.append(f"{mod}:{node.lineno} -> {target}")
                    named[mod].add(target)
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = resolve(mod, is_package, node)
                if node.module is None and any(n in modules for n in names[1:]):
                    names = names[1:]  # `from . import sub`: the submodule, not the package's __init__
            for name in names:
                if name in modules and name != mod:
                    edges[mod].add(name)
    every = {m: edges[m] | named[m] for m in modules}
    levels, chain = depth(edges)
    levels_by_name, chain_by_name = depth(every)
    return {
        "modules": len(modules),
        "lines": sum(len(p.read_text(encoding="utf-8").splitlines()) for p in modules.values()),
        "largest_classes": sorted(classes, reverse=True)[:5],
        "largest_classes_with_bases": with_bases(class_bases)[:5],
        "largest_functions": sorted(functions, reverse=True)[:5],
        "function_level_imports": len(local_imports),
        "imports_by_name": by_name_imports,
        "cycles": strongly_connected(edges),
        "cycles_with_imports_by_name": strongly_connected(every),
        "import_depth": levels,
        "longest_import_chain": chain,
        "import_depth_with_imports_by_name": levels_by_name,
        "longest_import_chain_with_imports_by_name": chain_by_name,
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
    print(
        "largest classes with their bases:",
        ", ".join(
            f"{name} ({n}{': ' + ' + '.join(bases) if bases else ''})"
            for n, name, bases in figures["largest_classes_with_bases"]
        ),
    )
    print("largest functions:", ", ".join(f"{name} ({n})" for n, name in figures["largest_functions"]))
    print(f"SLF001 (private reach-ins): {figures['slf001']}")
    print(f"function-level imports: {figures['function_level_imports']}")
    print(f"imports by name: {len(figures['imports_by_name'])}", *figures["imports_by_name"], sep="\n  ")
    print(f"import-graph depth: {figures['import_depth']} modules")
    print("  " + " -> ".join(figures["longest_import_chain"]))
    print(
        f"import-graph depth, imports by name included: {figures['import_depth_with_imports_by_name']} modules"
    )
    print("  " + " -> ".join(figures["longest_import_chain_with_imports_by_name"]))
    print(f"import cycles: {len(figures['cycles'])}")
    for group in figures["cycles"]:
        print(f"  {len(group)} modules: {' <-> '.join(group)}")
    print(f"import cycles, imports by name included: {len(figures['cycles_with_imports_by_name'])}")
    for group in figures["cycles_with_imports_by_name"]:
        print(f"  {len(group)} modules: {' <-> '.join(group)}")


if __name__ == "__main__":
    main()
