"""benchmarks/bench_scale.py at a tiny size: both sides are built and served, and the JSON holds every figure
issue 29 compares (the 100,000-chunk run's results must stay reproducible)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_tiny_run_writes_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_scale.py"), "--n", "300", "--queries", "3"]
    command += ["--work", str(tmp_path / "work"), "--out", str(out)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["n_chunks"] == 300
    fl, peer = result["finderledge_faiss"], result["bm25s_faiss_flat"]
    for side in (fl, peer):
        assert side["build_s"] > 0 and side["build_peak_rss_mib"] > 0 and side["disk_mib"] > 0
        for key in (
            "import_s",
            "open_s",
            "first_hybrid_s",
            "keyword_p50_ms",
            "vector_p50_ms",
            "hybrid_p50_ms",
        ):
            assert side["serve"][key] > 0, key
    for key in ("add_one_s", "remove_one_s", "add_one_again_s", "remove_one_again_s"):
        assert fl["serve"][key] > 0, key
    assert 0 <= fl["serve"]["hybrid_beyond_slowest_leg_p50_ms"] < fl["serve"]["hybrid_p50_ms"]
    assert peer["sync_s"] > 0  # the peer's fsync of its files, timed apart from its build
    assert set(result["ratios"]) == {
        "build",
        "build_vs_peer_synced",
        "build_peak_rss",
        "disk",
        "add_one_vs_peer_rebuild",
        "remove_one_vs_peer_rebuild",
        "add_one_again_vs_peer_rebuild",
        "remove_one_again_vs_peer_rebuild",
        "keyword_p50",
        "vector_p50",
        "hybrid_p50",
        "hybrid_minus_slowest_leg_ms",
    }
    slowest = max(fl["serve"]["keyword_p50_ms"], fl["serve"]["vector_p50_ms"])
    assert result["ratios"]["hybrid_minus_slowest_leg_ms"] == fl["serve"]["hybrid_p50_ms"] - slowest
