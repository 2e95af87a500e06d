"""The hostile mix under load (issue 28), short form: a real ``finderledge serve --workers 2`` takes searchers,
an uploader and one hostile user sending a zip-bomb DOCX, a 200,000-row CSV, a 100-page PDF and a search with
a 50,000-value filter in turn.  No 5xx, no dropped connection, every answer as expected (413, 413, 201, 400),
and every accepted PDF ends ``indexed`` or ``failed`` with a reason.  The long form (15 searchers, 90 s, beside
a plain run) is ``python benchmarks/bench_server_load.py --hostile`` (benchmarks/results/server_load_hostile.json).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("locust") is None:  # looked up, never imported (it monkey-patches gevent in)
    pytest.skip("locust is not installed", allow_module_level=True)
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("reportlab")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import bench_server_load as bench

USERS, DURATION_S = 4, 15  # 2 searchers + 1 uploader + (added) 1 hostile user


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_hostile_mix_beside_searchers_breaks_nothing(tmp_path: Path) -> None:
    result = bench.measure(
        tmp_path / "index",
        users=USERS,
        duration=DURATION_S,
        workers=2,
        workdir=tmp_path / "run",
        hostile=True,
    )
    print("\n" + bench.report(result))
    assert result["http_5xx"] == 0 and result["dropped_connections"] == 0, result["failure_kinds"]
    assert result["failures"] == 0, result["failure_kinds"]
    hostile = {name for name in result["endpoints"] if "hostile" in name}
    assert {"POST hostile zip-bomb docx", "POST hostile filter 50,000 values"} <= hostile, hostile
    ends = result["hostile_uploads"]
    assert ends["not_final"] == [] and ends["other"] == [], ends
    assert ends["failed_without_reason"] == 0, ends
    assert ends["indexed"] + ends["failed_with_reason"] == ends["accepted"], ends
    assert result["uploads_answered_processing"]["not_final"] == [], result["uploads_answered_processing"]
    assert result["after_check"]["ok"], result["after_check"]
    assert result["server_log_errors"] == [], result["server_log_errors"]
