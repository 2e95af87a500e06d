"""``keyword_index="engine"`` with MaxScore pruning: the top-k equals scoring every posting.

The engine-side leg sets aside the postings of a query's common terms when they cannot change the top k
(:meth:`EngineKeywordIndex._pruned`).  On corpora where that happens (a word in nearly every chunk, words in
half of them, duplicated texts that tie, partitions, Japanese through Sudachi) every search must give the same
ids in the same order and the same scores as the unpruned statement, and pruning must really have run.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.ledgers import postings
from finderledge.ledgers.postings import EngineKeywordIndex
from finderledge.tokenizer import AutoTokenizer

RARE = [f"topic{i}" for i in range(40)]
COMMON = ["the", "and", "of", "data"]
JA = [
    "東京都の倉庫で在庫を管理しています。",
    "請求書の払い戻しは三日以内に処理されます。",
    "検索エンジンの索引は毎晩更新されます。",
    "顧客の注文は倉庫から発送されます。",
]


def _corpus(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    docs: list[tuple[str, str, dict[str, Any]]] = []
    for i in range(500):
        words = ["the"] * rng.randint(1, 6)  # in every chunk: the commonest term
        words += [w for w in COMMON[1:] if rng.random() < 0.6]
        words += [rng.choice(RARE) for _ in range(rng.randint(0, 5))]
        words += ["filler"] * rng.randint(0, 30)
        rng.shuffle(words)
        md: dict[str, Any] = {"tenant": rng.choice(["a", "b", "c"]), "n": i}
        if i % 13 == 0:
            md.pop("tenant")
        docs.append((f"d{i:04d}", " ".join(words), md))
    for i in range(0, 60, 3):  # exact duplicates under other ids: tied scores, broken by id
        _, text, md = docs[i]
        docs.append((f"c{i:04d}", text, dict(md)))
    for i in range(80):
        docs.append((f"j{i:03d}", "".join(rng.sample(JA, rng.randint(1, 3))) + " the", {"tenant": "ja"}))
    return docs


def _same(pruned: list[tuple[str, float]], full: list[tuple[str, float]], tol: float = 1e-12) -> None:
    """The same ranking: rank by rank the same score (to ``tol``, relative: the statement sums a chunk's terms in
    its plan's order, the pruned path in the query's), every id at the score the statement gives it, and the same
    ids above the last score (ids may differ only among chunks tied to ``tol``)."""
    assert len(pruned) == len(full)
    scores = dict(full)
    last = full[-1][1] if full else 0.0
    for (_, a), (_, b) in zip(pruned, full, strict=True):
        assert a == pytest.approx(b, rel=tol, abs=tol)
    for cid, a in pruned:
        if cid in scores:
            assert a == pytest.approx(scores[cid], rel=tol, abs=tol)
        else:  # cut at the k-th place among chunks tied with it
            assert a == pytest.approx(last, rel=tol, abs=tol), (cid, pruned, full)
    floor = last * (1 + tol)
    assert {i for i, s in pruned if s > floor} == {i for i, s in full if s > floor}
    for (ia, a), (ib, b) in itertools.pairwise(pruned):  # ties broken by id
        assert a > b or (a == b and ia < ib)


def test_pruned_top_k_equals_every_posting_scored(
    tmp_path: Path, pg_url: str, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postings, "_PRUNE_MIN_POSTINGS", 0)  # a small corpus: prune whenever the bound allows
    monkeypatch.setattr(postings, "_PRUNE_MIN_CHUNKS", 0)
    rng = random.Random(43)
    docs = _corpus(rng)
    fl = FinderLedge(
        tmp_path / "w",
        database_url=pg_url,
        database_schema=fresh_schema(),
        embedding=fake_embeddings,
        keyword_index="engine",
        keyword_tokenizer=AutoTokenizer(japanese="always"),
        partition_key="tenant",
        show_progress=False,
        fusion="rrf",
        chunk_size=100_000,
        chunk_overlap=0,
    )
    try:
        fl.add_texts([t for _, t, _ in docs], [md for _, _, md in docs], ids=[i for i, _, _ in docs])
        engine = fl.engine.replica.keyword.handle
        assert isinstance(engine, EngineKeywordIndex)
        queries = [
            " ".join(rng.sample(RARE, rng.randint(1, 3)) + rng.sample(COMMON, rng.randint(1, 3)))
            for _ in range(40)
        ]
        queries += ["the the topic1", "topic3 topic3 and of the", "倉庫 the", "検索エンジン 倉庫 the and"]
        queries += [" ".join(rng.sample(RARE, 2)) + " filler the" for _ in range(10)]
        pruned_runs = 0
        for flt in (
            None,
            {"tenant": "a"},
            {"tenant": {"$in": ["a", "b"]}},
            {"tenant": {"$ne": "a"}},
            {"tenant": "ja"},
            {"n": {"$gte": 250}},  # a filter left to check on metadata: every posting is scored, as before
            {"$and": [{"tenant": "b"}, {"n": {"$lt": 300}}]},
        ):
            for q in queries:
                for k in (1, 3, 10, 25):
                    engine.prune = False
                    full = engine.search(q, k, flt)
                    engine.prune = True
                    got = engine.search(q, k, flt)
                    _same(got, full)
                    parts, left = engine._scope(flt)
                    if left is not None:  # a filter to check on metadata: search() scored every posting
                        continue
                    direct = engine._pruned(Counter(engine.tokenizer(q)), k, parts)
                    if direct is not None:
                        pruned_runs += 1
                        _same(direct, full)
        # equal texts score exactly equal on the pruned path, listed by id
        tied = engine._pruned(Counter(engine.tokenizer("topic1 topic2 topic3 the and")), 50, None)
        assert tied is not None
        got = dict(tied)
        pairs = [(f"d{i:04d}-0000", f"c{i:04d}-0000") for i in range(0, 60, 3)]
        assert any(a in got for a, _ in pairs)
        assert all(got[a] == got[c] for a, c in pairs if a in got and c in got)
        assert pruned_runs > 200  # pruning ran (the common terms were set aside), not only the fallback
    finally:
        fl.close()
