"""benchmarks/code_shape.py measures what issue 40 bounds: a class counted with its bases, imports by name in
the import graph (its cycles and depth)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _shape() -> ModuleType:
    spec = importlib.util.spec_from_file_location("code_shape", ROOT / "benchmarks" / "code_shape.py")
    assert spec is not None and spec.loader is not None
    shape = importlib.util.module_from_spec(spec)
    sys.modules["code_shape"] = shape
    spec.loader.exec_module(shape)
    return shape


def _tree(src: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = src / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return src


def test_a_class_is_counted_with_its_bases_under_src(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "base.py": "class Root:\n    a = 1\n\n\nclass Base(Root):\n    b = 2\n    c = 3\n",
            "child.py": "from typing import Generic, TypeVar\n\nfrom .base import Base as Parent\n\n"
            "T = TypeVar('T')\n\n\nclass Child(Parent, Generic[T]):\n    d = 4\n",
        },
    )
    figures = _shape().scan(src)
    largest = figures["largest_classes_with_bases"][0]
    # Child (2 lines) + Base (3) + Root (2); Generic is not under src and counts nothing
    assert largest == (7, "pkg.child.Child", ["pkg.base.Base", "pkg.base.Root"])


def test_imports_by_name_join_the_graph_its_cycles_and_depth(tmp_path: Path) -> None:
    src = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "X = 1\n",
            "mid.py": "from .low import X\n",
            "top.py": "import importlib\n\n\ndef load():\n    return importlib.import_module('.mid', __package__)\n",
            "d.py": "def g():\n    from . import e\n",
            "e.py": "from importlib import import_module\n\nM = import_module('pkg.d')\n",
        },
    )
    figures = _shape().scan(src)
    assert sorted(figures["imports_by_name"]) == ["pkg.e:3 -> pkg.d", "pkg.top:5 -> pkg.mid"]
    assert figures["cycles"] == []  # d imports e in a function; e imports d only by name
    assert figures["cycles_with_imports_by_name"] == [["pkg.d", "pkg.e"]]
    assert (figures["import_depth"], figures["longest_import_chain"]) == (2, ["pkg.d", "pkg.e"])
    assert figures["import_depth_with_imports_by_name"] == 3
    assert figures["longest_import_chain_with_imports_by_name"] == ["pkg.top", "pkg.mid", "pkg.low"]
