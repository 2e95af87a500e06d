"""Load on a real ``finderledge serve --workers 2`` process (Locust, headless, in a subprocess): no failure,
and no upload lost.

The short form of benchmarks/bench_server_load.py: 8 users (7 searchers in English and Japanese, some with
tags/filters, some chatting; 1 uploader of small distinct files) for 25 s against 127.0.0.1.  Afterwards
every document the uploader recorded must be listed and found by its marker word by keyword search (as the
top hit, and with a filter on its document id).  The figures are printed (``pytest -s``); the long form
writes benchmarks/results/server_load.json.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

if (
    importlib.util.find_spec("locust") is None
):  # looked up, never imported: importing it monkey-patches gevent in
    pytest.skip("locust is not installed", allow_module_level=True)
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))

import bench_server_load as bench

USERS, DURATION_S = 8, 25


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_load_with_an_uploader_loses_nothing(tmp_path: Path) -> None:
    result = bench.measure(
        tmp_path / "index", users=USERS, duration=DURATION_S, workers=2, workdir=tmp_path / "run"
    )
    print("\n" + bench.report(result))
    assert result["requests"] > 50, result["locust_output_tail"]  # ~10/s on an idle machine
    assert result["failures"] == 0, result["failure_kinds"]
    assert result["locust_exit_code"] == 0, result["locust_output_tail"]
    assert set(result["endpoints"]) >= {
        "POST upload",
        "POST search en",
        "POST search ja",
        "POST search filtered",
        "POST chat",
        "POST chat stream",
        "GET list",
    }, sorted(result["endpoints"])
    check = result["after_check"]
    assert check["uploads_recorded"] >= 5, check  # the uploader kept uploading (~20 on an idle machine)
    assert check["missing"] == [], f"uploads not listed: {check['missing']}"
    assert check["not_found"] == [], f"uploads not found by their marker word: {check['not_found']}"
    assert result["server_log_errors"] == [], result["server_log_errors"]
