"""Issue 39, partition statistics follow the filter: a filter on the partition key that does not pin one tenant
(``$ne``, ``$nin``, a several-value ``$in``, ``$or``, inside ``$and``) scores with the statistics of the
partitions it reaches, so ranks and every score are the same with and without documents of partitions it
excludes (before: 36 of 63 rank lists changed with another tenant's data).  Fake embeddings, FAISS (exact)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.keyword_store import KeywordStore
from finderledge.partitions import MISSING, OTHER, corpus_of, partitions_of

VOCAB = [f"w{i}" for i in range(20)] + ["apple", "river", "ledger", "quartz"]
QUERIES = ["w1 apple", "quartz w3 w3", "river", "ledger w0 w7 w12"]
MODES = ("keyword", "hybrid", "vector")
FIELDS = ("relevance_score", "fusion_score", "vector_score", "keyword_score", "vector_rank", "keyword_rank")
#: per operator, filters that exclude tenant "x" and the chunks without a tenant (the intruders below)
FILTERS: dict[str, list[dict[str, Any]]] = {
    "$eq": [{"tenant": {"$eq": "t0"}}, {"tenant": "t1"}],
    "$in": [{"tenant": {"$in": ["t0", "t1"]}}, {"tenant": {"$in": ["t2", 7]}}],
    "$ne": [{"tenant": {"$ne": "x"}}],
    "$nin": [{"tenant": {"$nin": ["x", "t2"]}}, {"tenant": {"$nin": ["x"]}}],
    "$or": [{"$or": [{"tenant": "t0"}]}, {"$or": [{"tenant": "t0"}, {"tenant": {"$in": ["t2"]}}]}],
    "$and": [
        {"$and": [{"tenant": {"$ne": "x"}}, {"n": {"$gte": 1}}]},
        {"$and": [{"tenant": {"$in": ["t0", "t1", "x"]}}, {"tenant": {"$ne": "x"}}]},
        {"$and": [{"$or": [{"tenant": "t1"}, {"tenant": "t2"}]}, {"n": {"$lt": 2}}]},
    ],
}


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(words)).capitalize() + "."


def _docs(seed: int) -> tuple[list[tuple[str, str, dict[str, Any]]], list[tuple[str, str, dict[str, Any]]]]:
    """The kept documents (tenants t0-t2, and a numeric tenant 7) and the intruders (tenant x, and documents
    without a tenant), each in a shuffled add order."""
    rng = random.Random(seed)
    kept = [
        (f"{t}-{d}", _text(rng, rng.randint(3, 30)), {"tenant": t, "n": d % 3})
        for t in ("t0", "t1", "t2")
        for d in range(rng.randint(3, 8))
    ]
    kept += [(f"seven-{d}", _text(rng, 10), {"tenant": 7, "n": d}) for d in range(2)]
    intruders = [(f"x-{d}", _text(rng, rng.randint(3, 30)), {"tenant": "x", "n": d % 3}) for d in range(12)]
    intruders += [(f"none-{d}", _text(rng, 8), {"n": d % 3}) for d in range(4)]
    rng.shuffle(kept)
    rng.shuffle(intruders)
    return kept, intruders


def _build(docs: list[tuple[str, str, dict[str, Any]]]) -> FinderLedge:
    fl = FinderLedge(
        vector_store="faiss",
        embedding=DeterministicFakeEmbedding(size=16),
        partition_key="tenant",
        show_progress=False,
        env_file=None,
    )
    for doc_id, text, meta in docs:  # one write each: the buffer and segments differ between the two indexes
        fl.add_texts([text], metadatas=[meta], ids=[doc_id])
    fl.remove_document(docs[0][0])
    return fl


def _results(fl: FinderLedge, query: str, mode: str, flt: dict[str, Any]) -> list[tuple[Any, ...]]:
    found = fl.search(query, search_mode=mode, k=50, filter=flt)
    return [(r.id, r.score, *(r.info.get(f) for f in FIELDS)) for r in found]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("operator", sorted(FILTERS))
def test_ranks_and_scores_ignore_partitions_the_filter_excludes(operator: str, seed: int) -> None:
    kept, intruders = _docs(seed)
    mixed = list(kept)
    rng = random.Random(seed + 100)
    for doc in intruders:  # the intruders among the kept documents, the kept ones' order unchanged
        mixed.insert(rng.randint(1, len(mixed)), doc)
    alone, together = _build(kept), _build(mixed)
    try:
        compared = 0
        for flt in FILTERS[operator]:
            for query in QUERIES:
                for mode in MODES:
                    mine = _results(alone, query, mode, flt)
                    shared = _results(together, query, mode, flt)
                    assert shared == mine, (flt, query, mode, shared, mine)
                    assert not any(r[0].startswith(("x-", "none-")) for r in shared)
                    compared += bool(mine)
        assert compared > 0
    finally:
        alone.close()
        together.close()


def test_a_filter_resolves_to_the_partitions_it_reaches() -> None:
    def reached(flt: dict[str, Any]) -> list[Any]:
        found = partitions_of(flt, "tenant")
        assert found is not None
        return [g for g in ("a", "b", "c", MISSING, OTHER) if found(g)]

    assert reached({"tenant": {"$ne": "b"}}) == ["a", "c", OTHER]  # a missing field never matches $ne
    assert reached({"tenant": {"$nin": ["a", "b"]}}) == ["c", OTHER]
    assert reached({"tenant": {"$in": ["a", "c"]}}) == ["a", "c"]
    assert reached({"tenant": {"$in": ["a", 3]}}) == ["a", OTHER]
    assert reached({"$or": [{"tenant": "a"}, {"tenant": "b"}]}) == ["a", "b"]
    assert reached({"$and": [{"tenant": {"$ne": "a"}}, {"tenant": {"$ne": "b"}}, {"n": 1}]}) == ["c", OTHER]
    assert reached({"tenant": {"$gte": "b"}}) == ["b", "c"]
    # no condition on the key, or an $or branch free of it: every partition (the whole index's statistics)
    assert partitions_of({"lang": "ja"}, "tenant") is None
    assert partitions_of({"$or": [{"tenant": "a"}, {"lang": "ja"}]}, "tenant") is None
    assert corpus_of({"tenant": "a"}, "tenant") == "a"  # one pinned partition keeps its own path
    assert corpus_of({"tenant": {"$ne": "a"}}, None) is None
    assert partitions_of({"tenant": {"$ne": "a"}}, "tenant") == partitions_of(
        {"tenant": {"$ne": "a"}}, "tenant"
    )


def test_keyword_store_counts_the_reached_partitions_only() -> None:
    """The store's own figures: chunk count and ids of ``$ne`` are those of the partitions it reaches."""
    store = KeywordStore(partition_key="tenant")
    store.add(
        ["a1", "b1", "c1", "none", "five"],
        ["alpha beta", "alpha", "beta gamma", "alpha gamma", "delta"],
        [{"tenant": "a"}, {"tenant": "b"}, {"tenant": "c"}, {}, {"tenant": 5}],
    )
    ne_b = partitions_of({"tenant": {"$ne": "b"}}, "tenant")
    assert ne_b is not None
    assert store.partition_size(ne_b) == 3
    assert sorted(store.partition_ids(ne_b)) == ["a1", "c1", "five"]
    before = store.search("alpha", filter={"tenant": {"$ne": "b"}})
    store.add(["b2", "b3", "b4"], ["alpha alpha"] * 3, [{"tenant": "b"}] * 3)
    store.add(["none2"], ["alpha"], [{}])
    assert store.search("alpha", filter={"tenant": {"$ne": "b"}}) == before == [("a1", before[0][1])]
    store.close()
