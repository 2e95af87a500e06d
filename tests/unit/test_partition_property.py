"""Partitions (``partition_key``): a search pinned to one partition returns the same ranks and scores, both legs'
raw scores and the final score, whether or not other partitions exist (issue 28: a BM25 side channel between
tenants).  Random corpora for several tenants, fake embeddings."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

VOCAB = [f"w{i}" for i in range(25)] + ["apple", "river", "ledger", "quartz", "zebra"]
MODES = ("hybrid", "vector", "keyword")
FIELDS = ("relevance_score", "fusion_score", "vector_score", "keyword_score", "vector_rank", "keyword_rank")


def _open(store: str, **extra: Any) -> FinderLedge:
    return FinderLedge(
        vector_store=store,
        embedding=DeterministicFakeEmbedding(size=16),
        partition_key="tenant",
        show_progress=False,
        env_file=None,
        **extra,
    )


def _text(rng: random.Random, words: int) -> str:
    sentences = []
    while words > 0:
        n = min(words, rng.randint(6, 12))
        sentences.append(" ".join(rng.choice(VOCAB) for _ in range(n)).capitalize() + ".")
        words -= n
    return " ".join(sentences)


def _corpus(seed: int, tenants: int, max_docs: int) -> dict[str, list[tuple[str, str]]]:
    rng = random.Random(seed)
    return {
        f"t{t}": [(f"t{t}-doc{d}", _text(rng, rng.randint(3, 60))) for d in range(rng.randint(1, max_docs))]
        for t in range(tenants)
    }


def _build(
    store: str, corpus: dict[str, list[tuple[str, str]]], order: list[str], **extra: Any
) -> FinderLedge:
    """Add the documents one write at a time, taking tenants in ``order`` (each tenant's own order kept), then
    remove each tenant's first document where it has several."""
    fl = _open(store, chunk_size=120, chunk_overlap=0, **extra)
    queues = {t: list(docs) for t, docs in corpus.items()}
    for tenant in order:
        doc_id, text = queues[tenant].pop(0)
        fl.add_texts([text], metadatas=[{"tenant": tenant, "n": len(text) % 3}], ids=[doc_id])
    for docs in corpus.values():
        if len(docs) > 1:
            fl.remove_document(docs[0][0])
    return fl


def _results(fl: FinderLedge, tenant: str, query: str, mode: str, how: str) -> list[tuple[Any, ...]]:
    if how == "scoped":
        found = fl.scoped({"tenant": tenant}).search(query, search_mode=mode, k=50)
    else:
        flt = {"tenant": tenant} if how == "filter" else {"$and": [{"tenant": {"$eq": tenant}}]}
        found = fl.search(query, search_mode=mode, k=50, filter=flt)
    return [(r.id, r.score, *(r.info.get(f) for f in FIELDS)) for r in found]


def _close(x: float | None, y: float | None) -> bool:
    """Equal to 1e-5 (a leg's score is None where that leg did not find the passage: then both must be None;
    pytest 9.2's approx refuses None)."""
    if x is None or y is None:
        return x is y
    return x == pytest.approx(y, rel=1e-5, abs=1e-6)


def _same(shared: list[tuple[Any, ...]], mine: list[tuple[Any, ...]], exact: bool) -> bool:
    if exact:
        return shared == mine
    return len(shared) == len(mine) and all(
        a[0] == b[0]
        and a[5] == b[5]
        and a[-2:] == b[-2:]
        and all(_close(x, y) for x, y in zip(a[1:5], b[1:5]))
        for a, b in zip(shared, mine)
    )


def _check(
    store: str, seed: int, tenants: int, max_docs: int, queries: list[str], exact: bool = True
) -> None:
    corpus = _corpus(seed, tenants, max_docs)
    rng = random.Random(seed + 1)
    order = [t for t, docs in corpus.items() for _ in docs]
    rng.shuffle(order)
    together = _build(store, corpus, order)
    try:
        for tenant in corpus:
            alone = _build(store, {tenant: corpus[tenant]}, [t for t in order if t == tenant])
            try:
                for query in queries:
                    for mode in MODES:
                        for how in ("filter", "scoped", "and"):
                            mine = _results(alone, tenant, query, mode, how)
                            shared = _results(together, tenant, query, mode, how)
                            assert _same(shared, mine, exact), (tenant, query, mode, how, shared, mine)
                            assert all(r[0].startswith(tenant + "-") for r in shared)
            finally:
                alone.close()
    finally:
        together.close()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    tenants=st.integers(2, 4),
    queries=st.lists(
        st.lists(st.sampled_from(VOCAB), min_size=1, max_size=4).map(" ".join), min_size=1, max_size=3
    ),
)
def test_a_partition_scores_alike_alone_and_among_others(seed: int, tenants: int, queries: list[str]) -> None:
    _check("faiss", seed, tenants, 6, queries)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_partition_ranks_alike_on_chroma(seed: int) -> None:
    """Chroma computes a cosine differently (last float32 digit) on collections of other sizes: ranks and keyword
    scores are equal, its vector scores (and what follows from them) equal to 1e-6 (FAISS: exactly)."""
    _check("chroma", seed, 3, 5, ["w1 apple", "zebra w3 w3", "river"], exact=False)


@pytest.mark.parametrize("store", ["faiss", "chroma"])
def test_side_channel_is_closed_for_a_unique_word(store: str) -> None:
    """Alice's score for her unique word does not move when Bob adds 5 documents containing it."""
    alice = [
        ("alice-1", "The quartzite report covers the zebra migration in detail."),
        ("alice-2", "River notes."),
    ]
    bob = [(f"bob-{i}", f"quartzite quartzite sample {i} in the ledger") for i in range(5)]
    fl = _open(store)
    try:
        for doc_id, text in alice:
            fl.add_texts([text], metadatas=[{"tenant": "alice"}], ids=[doc_id])
        before = _results(fl, "alice", "quartzite", "keyword", "filter")
        hybrid_before = _results(fl, "alice", "quartzite", "hybrid", "scoped")
        for doc_id, text in bob:
            fl.add_texts([text], metadatas=[{"tenant": "bob"}], ids=[doc_id])
        assert _results(fl, "alice", "quartzite", "keyword", "filter") == before
        assert _results(fl, "alice", "quartzite", "hybrid", "scoped") == hybrid_before
        # a search that pins no partition keeps corpus-wide statistics: there the score moves
        wide = fl.search("quartzite", search_mode="keyword", k=20)
        assert {r.id: r.info["keyword_score"] for r in wide}[before[0][0]] < before[0][5]
    finally:
        fl.close()


def test_calibration_and_trace_are_the_partitions_own() -> None:
    """A partition large enough to be calibrated (>= 100 chunks) gets its own gates; the trace names its MRR."""
    corpus = _corpus(7, 3, 1)
    rng = random.Random(3)
    corpus = {t: [(f"{t}-doc{d}", _text(rng, 30)) for d in range(110 if t == "t0" else 60)] for t in corpus}
    order = [t for t, docs in corpus.items() for _ in docs]
    rng.shuffle(order)
    together = _build("faiss", corpus, order)
    alone = _build("faiss", {"t0": corpus["t0"]}, [t for t in order if t == "t0"])
    try:
        mine = alone.search("w1 apple river", filter={"tenant": "t0"}, k=20)
        shared = together.search("w1 apple river", filter={"tenant": "t0"}, k=20)
        assert mine.trace.weights_reason == shared.trace.weights_reason
        assert "calibrated on" in shared.trace.weights_reason
        assert [(r.id, r.score) for r in shared] == [(r.id, r.score) for r in mine]
    finally:
        together.close()
        alone.close()


def test_partition_key_from_the_environment_is_recorded(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finderledge.errors import ConfigurationError

    monkeypatch.setenv("FINDERLEDGE_PARTITION_KEY", "tenant")
    fl = FinderLedge(tmp_path / "index", embedding=DeterministicFakeEmbedding(size=8), env_file=None)
    assert fl.settings.partition_key == "tenant"
    fl.close()
    monkeypatch.delenv("FINDERLEDGE_PARTITION_KEY")
    fl = FinderLedge(tmp_path / "index", embedding=DeterministicFakeEmbedding(size=8), env_file=None)
    assert fl.settings.partition_key == "tenant"  # recorded with the directory
    fl.close()
    with pytest.raises(ConfigurationError, match="partition_key"):
        FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=None, partition_key="$and")
