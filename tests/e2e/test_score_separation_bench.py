"""benchmarks/score_separation.py on two tiny BEIR datasets: a record names the fusion, the embedding model
and the commit it measured, its "old" column is an explicit min-max baseline (not a copy of today's fused
value), and index caches are keyed by the embedding model, so a stale index is never reused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from finderledge.embeddings import embedding_model_id

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import score_separation as sep  # the benchmark is a script, not a package

ALPHA = {
    "a1": "Password reset links are valid for thirty minutes after they are sent.",
    "a2": "Refunds are processed within five business days of the request.",
    "a3": "Invoices need the approval of a manager before they are paid.",
    "a4": "Travel expenses are reimbursed against a receipt.",
    "a5": "The office is closed on public holidays.",
    "a6": "Backups of the database run every night at two.",
}
ALPHA_QUERIES = {
    "q1": ("How long is a password reset link valid?", "a1"),
    "q2": ("When are refunds processed?", "a2"),
    "q3": ("Who approves invoices before payment?", "a3"),
}
BETA = {
    "b1": "Volcanic eruptions release ash into the stratosphere.",
    "b2": "Glaciers retreat as average temperatures rise.",
}
BETA_QUERIES = {"p1": ("What do volcanic eruptions release?", "b1"), "p2": ("Why do glaciers retreat?", "b2")}


def _head() -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()


def _write_beir(folder: Path, corpus: dict[str, str], queries: dict[str, tuple[str, str]]) -> None:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": i, "title": "", "text": t}) + "\n" for i, t in corpus.items())
    )
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": t}) + "\n" for q, (t, _) in queries.items())
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, (_, d) in queries.items())
    )


@pytest.fixture
def datasets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Any) -> Path:
    """Two tiny English BEIR datasets in place of the shared ones; the default model is the session's."""
    _write_beir(tmp_path / "data" / "alpha", ALPHA, ALPHA_QUERIES)
    _write_beir(tmp_path / "data" / "beta", BETA, BETA_QUERIES)
    monkeypatch.setattr(sep, "ROOT", tmp_path / "data")
    monkeypatch.setattr(sep, "ENGLISH", ("alpha", "beta"))
    monkeypatch.setattr(sep, "make_model", lambda model: minilm)
    monkeypatch.setattr(
        sep,
        "nonsense",
        lambda words, n, seed, sep_=" ": ["zebra quantum violin nebula", "pancake glacier saxophone lantern"],
    )
    return tmp_path


def test_a_record_names_fusion_model_and_commit_and_its_baseline_is_min_max(
    datasets: Path, minilm: Any
) -> None:
    out, cache = datasets / "out.json", datasets / "cache"
    before = _head()
    assert (
        sep.main(
            ["--datasets", "alpha", "--modes", "hybrid,keyword", "--cache", str(cache), "--out", str(out)]
        )
        == 0
    )
    (record,) = json.loads(out.read_text())
    assert record["fusion"] == "adaptive" and record["embedding_model_id"] == embedding_model_id(minilm)
    assert record["commit"] in (before, _head()) and isinstance(record["uncommitted"], list)
    assert "relative_score" in record["baseline"]["hybrid"] and record["command"].startswith(
        "python benchmarks/"
    )
    hybrid = record["modes"]["hybrid"]
    # min-max fusion gives a top hit both legs rank first 2.0, whatever the query: the "old" score
    assert hybrid["top1_old"]["with"]["max"] == 2.0 and hybrid["top1_new"]["with"]["max"] <= 1.0
    assert hybrid["auc"]["other:beta"]["new"] is not None and "ndcg@10_baseline" in hybrid
    # the index lives under a name that carries the embedding model's id, and nowhere else
    assert [p.name for p in cache.iterdir()] == [
        sep.index_directory(cache, "alpha", embedding_model_id(minilm)).name
    ]
    assert sep.tables(json.loads(out.read_text())).startswith(
        f"Measured: alpha (minilm): {embedding_model_id(minilm)}"
    )


def test_the_old_column_is_the_min_max_fused_score_and_the_raw_leg_score(datasets: Path, minilm: Any) -> None:
    fl = sep.open_index("alpha", minilm, datasets / "cache")
    baseline = sep.open_index("alpha", minilm, datasets / "cache", fusion=sep.BASELINE_FUSION)
    try:
        queries = [(q, t, None) for q, (t, _) in ALPHA_QUERIES.items()]
        for row, (_, text, _) in zip(sep.run_set(fl, baseline, queries, "hybrid", 3), queries):
            minmax = baseline.search(text, k=3)
            assert baseline.settings.fusion == "relative_score" and fl.settings.fusion == "adaptive"
            assert row["old"] == [r.info["fusion_score"] for r in minmax]
            assert row["beir_old"] == [r.metadata["beir_id"] for r in minmax]
            assert row["new"] == [r.score for r in fl.search(text, k=3)] and row["old"] != row["new"]
        for row, (_, text, _) in zip(sep.run_set(fl, baseline, queries, "keyword", 3), queries):
            assert row["old"] == [
                r.info["keyword_score"] for r in fl.search(text, k=3, search_mode="keyword")
            ]
    finally:
        baseline.close()
        fl.close()


class _OtherModel(Embeddings):
    """A deterministic stand-in for another embedding model (same dimension as MiniLM)."""

    model_name = "other-test-model"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return [float((hash(text) >> i) & 1) + 0.01 * i for i in range(384)]


def test_an_index_built_with_another_model_is_never_reused(datasets: Path, minilm: Any) -> None:
    cache = datasets / "cache"
    first = sep.open_index("alpha", minilm, cache)
    first.close()
    other = sep.open_index("alpha", _OtherModel(), cache)
    try:
        assert other.count()["documents"] == len(ALPHA)  # built afresh with the other model
        assert other.persist_directory != first.persist_directory
        assert sorted(p.name for p in cache.iterdir()) == sorted(
            sep.index_directory(cache, "alpha", embedding_model_id(m)).name for m in (minilm, _OtherModel())
        )
    finally:
        other.close()
