"""benchmarks/bench_build_peers.py at a tiny size, two rounds: every side is built and served, each figure the
closing note of issue 29 cites is in the JSON and positive, and the medians and ratios come from the rounds."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
N = 300
SIDES = ("finderledge", "bm25s_faiss", "langchain_index")


@pytest.mark.timeout(600)
def test_tiny_run_writes_every_side_and_ratio(tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_build_peers.py"), "--n", str(N)]
    command += ["--queries", "3", "--rounds", "2", "--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert (result["n_chunks"], result["rounds"], result["k"]) == (N, 2, 10)
    rounds = result["per_round"]
    assert len(rounds) == 2 and rounds[0]["order"] != rounds[1]["order"]  # the sides' order rotates
    assert len(result["load_avg_start_mid_end"]) == 2

    for side in SIDES:
        for figures in (result["median"][side], rounds[0][side], rounds[1][side]):
            for key in ("build_s", "peak_rss_mib", "io_written_mib", "disk_mib"):
                assert figures[key] > 0, (side, key)
            for key in ("open_s", "first_hybrid_s", "keyword_p50_ms", "vector_p50_ms", "hybrid_p50_ms"):
                assert figures["serve"][key] > 0, (side, key)
        build = [r[side]["build_s"] for r in rounds]
        assert result["median"][side]["build_s"] == pytest.approx(statistics.median(build))

    fl, lc = result["median"]["finderledge"], result["median"]["langchain_index"]
    for key in ("add_one_s", "remove_one_s", "add_one_again_s", "remove_one_again_s"):
        assert fl["serve"][key] > 0, key
    for key in ("add_one_s", "remove_one_s", "add_one_again_s", "remove_one_by_ids_s"):
        assert lc["serve"][key] > 0, key
    # one chunk per synthetic document, every one written by index(), then BM25 rebuilt on each add/remove
    assert lc["chunks"] == N and lc["index_result"]["num_added"] == N
    for part in ("split", "index", "save_faiss", "bm25_build_pickle"):
        assert 0 < lc["parts"][f"{part}_s"] < lc["build_s"], part
    assert lc["serve"]["parts"]["add_one"]["bm25_rebuild_pickle_s"] > 0
    assert lc["serve"]["parts"]["remove_one"]["split_index_full_s"] > 0

    ratios = result["ratios"]
    assert set(ratios["bm25s_faiss"]) == {
        "build",
        "build_vs_synced",
        "build_peak_rss",
        "disk",
        "io_written",
        "hybrid_p50",
        "add_one_vs_rebuild",
        "remove_one_vs_rebuild",
    }
    assert set(ratios["langchain_index"]) == {
        "build",
        "build_peak_rss",
        "disk",
        "io_written",
        "hybrid_p50",
        "add_one",
        "remove_one",
        "add_one_again",
        "remove_one_by_ids",
    }
    assert ratios["langchain_index"]["build"] == pytest.approx(fl["build_s"] / lc["build_s"])
    assert ratios["langchain_index"]["remove_one"] == pytest.approx(
        fl["serve"]["remove_one_s"] / lc["serve"]["remove_one_s"]
    )
    peer = result["median"]["bm25s_faiss"]
    assert ratios["bm25s_faiss"]["add_one_vs_rebuild"] == pytest.approx(
        fl["serve"]["add_one_s"] / peer["build_s"]
    )
