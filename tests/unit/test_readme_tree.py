"""The README's "How it is built" table is the map of the source tree (issue 40): every top-level module and
package is named there, every module of a stage package is named in its row, and the table names nothing that is
not in the tree; the top level holds at most 30 modules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "finderledge"
TOP_LIMIT = 30


def table_rows() -> list[tuple[str, str]]:
    """(package or module cell, holds cell) of each row of the README's tree table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("| stage | package or module | holds |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows.append((cells[1], cells[2]))
    return rows


def named(cell: str) -> set[str]:
    return set(re.findall(r"`([a-z_0-9]+(?:\.py|/))`", cell))


def test_every_top_level_module_and_package_is_in_the_table() -> None:
    in_table = set().union(*(named(left) for left, _ in table_rows()))
    in_tree = {p.name for p in SRC.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}}
    in_tree |= {p.name + "/" for p in SRC.iterdir() if (p / "__init__.py").is_file()}
    assert in_tree - in_table == set(), "modules or packages missing from README's table"
    assert in_table - in_tree == set(), "README's table names what is not in the tree"


def test_every_module_of_a_stage_package_is_named_in_its_row() -> None:
    for left, holds in table_rows():
        for package in (name for name in named(left) if name.endswith("/")):
            modules = {p.stem for p in (SRC / package).glob("*.py") if p.name != "__init__.py"}
            mentioned = set(re.findall(r"`([a-z_0-9]+)(?:\.py)?`", holds))
            missing = modules - mentioned
            assert not missing, f"README's row for {package} does not name {sorted(missing)}"


def test_the_top_level_stays_small() -> None:
    top = [p for p in SRC.glob("*.py") if p.name not in {"__init__.py", "__main__.py"}]
    assert len(top) <= TOP_LIMIT, sorted(p.name for p in top)
