"""benchmarks/bench_floor.py at a tiny size: builds interleaved, queries side by side, warm and cold, and the
JSON holds every figure issue 41 compares, each with its ratio and the load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURES = ("keyword_k10", "keyword_k100", "hybrid_k10", "hybrid_k100")


@pytest.mark.timeout(600)
def test_tiny_run_writes_every_ratio(tmp_path: Path) -> None:
    out = tmp_path / "floor.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_floor.py"), "--n", "300", "--queries", "4"]
    command += ["--rounds", "2", "--cold", "fadvise", "--serving", "6"]
    command += ["--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["n_chunks"] == 300 and result["candidates_per_leg"] == 100
    build = result["build"]
    assert len(build["rounds"]) == 2
    for row in build["rounds"]:
        for side in ("fl", "floor"):
            assert row[side]["build_s"] > 0 and len(row[side]["load_before"]) == 3
        assert row["floor"]["sync_s"] > 0  # the floor's fsync, timed apart
    # the order of the sides alternates between rounds
    assert list(build["rounds"][0])[1:3] == ["floor", "fl"] and list(build["rounds"][1])[1:3] == [
        "fl",
        "floor",
    ]
    assert result["cold_method"] == "fadvise"
    for cache in ("warm", "cold", "serving"):
        figures = result[f"queries_{cache}"]["figures"]
        assert set(figures) == set(FIGURES)
        for figure in figures.values():
            assert figure["fl_p50_ms"] > 0 and figure["floor_p50_ms"] > 0
            assert figure["ratio"] == figure["fl_p50_ms"] / figure["floor_p50_ms"]
            assert isinstance(figure["meets"], bool) and len(figure["load_start_end"]) == 2
            assert figure["fl_cpu_p50_ms"] > 0 and isinstance(figure["meets_cpu"], bool)
    # queries answered before the measured ones: warm-up 5, serving 5 + 6 others, cold none
    assert result["queries_warm"]["answered_before"] == 5
    assert result["queries_serving"]["answered_before"] == 11
    assert result["queries_cold"]["answered_before"] == 0
    for cache in ("warm", "cold"):
        first = result["first_search"][cache]
        assert len(first["rounds"]) == 2 and first["ratio"] > 0
        assert first["rounds"][0]["fl"]["first_hybrid_s"] > 0 and first["rounds"][0]["floor"]["open_s"] > 0
    assert result["queries_warm"]["floor_faiss_threads"] >= 1
    # where a keyword search's CPU goes, per k: the BM25 leg, the ledger read of the hits, the floor's parts
    for k in ("k10", "k100"):
        stage = result["queries_warm"]["stages"][k]
        assert stage["fl_bm25_leg_cpu_p50_ms"] >= 0 and stage["fl_read_hits_cpu_p50_ms"] >= 0
        assert stage["floor_bm25_cpu_p50_ms"] >= 0 and stage["floor_read_texts_cpu_p50_ms"] >= 0
        assert stage["hits_p50"] > 0
    expected = {"build", "build_vs_synced", "disk"}
    expected |= {f"{f}_p50_{c}" for f in FIGURES for c in ("warm", "cold", "serving")}
    expected |= {"first_search_warm", "first_search_cold"}
    cpu = {f"{f}_cpu_p50_{c}" for f in FIGURES for c in ("warm", "cold", "serving")}
    assert set(result["ratios"]) - expected <= cpu  # a CPU ratio is left out where the floor took no CPU tick
    expected |= set(result["ratios"]) & cpu
    assert set(result["ratios"]) == expected


def test_the_floor_finds_what_bm25s_retrieve_finds(tmp_path: Path) -> None:
    """The floor's fast top-k is bm25s's ranking (same chunks, same scores), not a cheaper, different one."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_floor
        import bench_scale
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import bm25s

    bench_scale.child_build_peer(tmp_path / "floor", 500)
    floor = bench_floor.Floor(tmp_path / "floor")
    for query in bench_scale.queries(10):
        rows, scores = floor.keyword_ids(query, 20)
        tokens = bm25s.tokenize([query], stopwords="en", show_progress=False)
        docs, expected = floor.bm25.retrieve(tokens, k=20, n_threads=1, show_progress=False)
        wanted = expected[0] > 0
        assert sorted(scores.tolist(), reverse=True) == scores.tolist()
        assert np.allclose(scores, expected[0][wanted])
        assert set(rows.tolist()) == set(docs[0][wanted].tolist()) or len(set(scores.tolist())) < len(scores)
        assert [text for text, _ in floor.hybrid(query, 10)] and len(floor.hybrid(query, 10)) == 10


def test_serving_answers_other_queries_before_the_same_measured_ones() -> None:
    """--serving N: the measured queries are those of the plain warm run, and none of the N answered first."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_floor
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    before, measured = bench_floor.split_queries(20, 0)
    served_before, served_measured = bench_floor.split_queries(20, 50)
    assert len(before) == 5 and len(measured) == 20 and served_measured == measured
    assert len(served_before) == 55 and served_before[:5] == before
    assert not set(served_before[5:]) & set(measured)
