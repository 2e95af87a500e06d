"""Issue 41's query-path work changes no ranking: on a built corpus (several adds, removals, a replacement),
every search in every mode, at k=10 and k=100, with and without a filter, gives the ids, order, scores and
texts the tree before it gave (recorded in tests/helpers/search_rankings_41.json by search_rankings.py)."""

from __future__ import annotations

import json
from pathlib import Path

from search_rankings import GOLDEN, rankings


def test_rankings_are_those_before_the_query_path_work(tmp_path: Path) -> None:
    before = json.loads(GOLDEN.read_text(encoding="utf-8"))
    now = json.loads(json.dumps(rankings(tmp_path / "index")))
    assert now.keys() == before.keys()
    differ = [key for key in before if now[key] != before[key]]
    assert not differ, f"{len(differ)} of {len(before)} rankings changed, e.g. {differ[:3]}: {now[differ[0]]}"
