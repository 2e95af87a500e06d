"""benchmarks/bench_postgres.py --quick: the whole benchmark at tiny sizes on a real PostgreSQL (pgserver).

Runs it as a fresh process (it starts its own server, and sets pgvector's exact-search threshold to 500 rows
so the HNSW path runs) and checks the JSON it writes: every section present, scifact's nDCG@10 the same in
Postgres mode as with FAISS (both exact, same vectors), recall a number in [0, 1], the fresh replica holding
every chunk and the catch-up finding the other process's new document in both legs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import optional_dataset

pytest.importorskip("pgserver")
pytest.importorskip("psycopg")

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_postgres.py"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_run_writes_the_results(tmp_path: Path) -> None:
    scifact = optional_dataset("scifact")  # without it (and outside CI) the run skips its scifact part
    out = tmp_path / "postgres_quick.json"
    command = [
        sys.executable,
        str(BENCH),
        "--quick",
        "--cache-dir",
        str(tmp_path / "cache"),
        "--out",
        str(out),
    ]
    if scifact is None:
        command.append("--skip-scifact")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=580, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["command"].startswith("python benchmarks/bench_postgres.py --quick")
    assert result["date"] and result["library"]["commit"]
    assert result["machine"]["cpus"] and result["machine"]["postgres"]["pgvector"]

    if scifact is not None:
        sci = result["scifact"]
        assert sci["documents"] == 150 and sci["queries"] == 15
        for mode in ("hybrid", "vector", "keyword"):
            pg, faiss = (
                sci["metrics"][f"postgres/{mode}"]["nDCG@10"],
                sci["metrics"][f"faiss/{mode}"]["nDCG@10"],
            )
            assert 0.0 < pg <= 1.0
            assert pg == pytest.approx(faiss, abs=1e-9), (mode, sci["metrics"])
        assert sci["embedding_cache"]["whole_run"]["passages_cached"] > 0

    syn = result["synthetic"]
    assert syn["chunks"] == {"postgres": 2000, "chroma": 2000, "faiss": 2000}
    assert all(seconds > 0 for seconds in syn["ingest_s"].values())
    latency = syn["latency"]
    for key in ("postgres/hybrid", "chroma/hybrid", "faiss/hybrid", "postgres/vector"):
        assert 0 < latency["wall_ms"][key]["p50"] <= latency["wall_ms"][key]["p95"]
    assert latency["ratio_hybrid_postgres_vs_chroma"]["p50"] > 0
    assert (
        latency["postgres_sql_profile"]["hybrid"]["sql_statements_per_search"] >= 1
    )  # it did talk to PostgreSQL

    recall = syn["recall"]
    assert recall["library_ef_search_k10"] >= 40
    assert recall["hnsw_index"] is True  # 2,000 rows > the quick run's threshold of 500: the HNSW path ran
    for key in (
        "pgvector_recall@10_k10",
        "pgvector_recall@10_k100",
        "pgvector_recall@100_k100",
        "chroma_recall@10_k10",
        "exact_reference_agrees_with_pgvector_exact",
    ):
        assert isinstance(recall[key], float) and 0.0 <= recall[key] <= 1.0, (key, recall[key])
    assert (
        recall["exact_reference_agrees_with_pgvector_exact"] >= 0.99
    )  # the numpy truth is pgvector's exact answer

    replica = syn["replica"]
    assert replica["replica_keyword_chunks"] == 2000
    assert replica["reopen_keyword_chunks"] == 2000 + replica["new_documents"] == 2100
    assert replica["new_document_found"] == {"keyword": True, "vector": True}
    assert replica["fresh_process_open_s"] > 0 and replica["catch_up_refresh_s"] >= 0
    assert "recall@10 vs exact" in done.stdout and "catch-up after 100 new documents" in done.stdout


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_write_benchmark_times_this_tree_against_a_baseline(tmp_path: Path) -> None:
    """``--writes`` (issue 43): one add_texts call per size and tree, in fresh processes; this tree given as
    its own baseline here, so both rows come from one run."""
    out = tmp_path / "postgres_writes.json"
    command = [
        sys.executable,
        str(BENCH),
        "--writes",
        "--write-sizes",
        "300",
        "--baseline-src",
        str(ROOT / "src"),
        "--out",
        str(out),
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = json.loads(out.read_text(encoding="utf-8"))["writes"]["runs"]
    assert sorted(r["tree"] for r in runs) == ["baseline", "this"]
    for run in runs:
        assert run["chunks"] == 300 and run["chunks_per_s"] > 0
        assert run["db_bytes_per_chunk"] > 0 and "chunks" in run["table_bytes_per_chunk"]
    assert "| this | 300 |" in done.stdout
