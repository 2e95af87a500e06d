"""benchmarks/bench_startup.py at tiny sizes: the baseline builds the index, both versions are timed, and the
JSON it writes has every section (issue 12's start-up figures must stay reproducible).

The ONNX export of the default model is the session's (``--cache-dir``: built by the ``minilm`` fixture's
first embedding), so the benchmark only checks it is there and times nothing of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_startup.py"
COMMANDS = ("import", "list", "stats", "first_search", "first_search_recorded_torch")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tiny_run_writes_every_section(minilm, session_cache: Path, tmp_path: Path) -> None:
    minilm.embed_query("warm the session's ONNX export")  # the one-time export, outside the benchmark
    out = tmp_path / "startup.json"
    command = [
        sys.executable,
        str(BENCH),
        "--chunks",
        "200",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--cache-dir",
        str(session_cache),
        "--out",
        str(out),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=880, env=env, cwd=ROOT
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))

    assert result["command"] == (
        "python benchmarks/bench_startup.py --chunks 200 --repeats 1 --warmup 0 --baseline 5962840"
    )
    assert result["index"]["chunks"] == 200 and result["index"]["documents"] == 20
    assert result["index"]["recorded_model"] == {
        "old": "sentence-transformers:all-MiniLM-L6-v2",
        "new": "onnx-int8:all-MiniLM-L6-v2",
        "new_recorded_torch": "sentence-transformers:all-MiniLM-L6-v2",
    }
    for name in COMMANDS:
        versions = ("new",) if name == "first_search_recorded_torch" else ("old", "new")
        for version in versions:
            runs = result["timings_s"][name][version]["runs"]
            assert len(runs) == 1 and 0 < runs[0] < 600, (name, version, runs)
    for ref in ("python", "st_load", "onnx_load"):
        assert len(result["references_s"][ref]["runs"]) == 1
    phases = result["onnx_load_phases_s"]
    assert set(phases) == {"import", "session", "first_embedding"} and all(
        v["median"] > 0 for v in phases.values()
    )
    # the one-time export was done before (the session's cache), and the JSON says the timed runs exclude it
    export = result["onnx_export"]
    assert export["cache"] == "given (--cache-dir)" and export["built_by_this_run"] is False
    assert "excluded" in export["note"]
    assert set(result["targets"]) == {
        "list_s",
        "stats_s",
        "first_search_s",
        "first_search_vs_onnx_load_s",
        "first_search_recorded_torch_s",
    }
    assert all(isinstance(t["met"], bool) for t in result["targets"].values())
    # what each command loads: the new default's first search runs ONNX Runtime, not torch
    loaded = result["heavy_modules_loaded"]
    assert "onnxruntime" in loaded["new"]["first_search"] and "torch" not in loaded["new"]["first_search"]
    assert "torch" in loaded["old"]["first_search"]
    assert not {"torch", "onnxruntime", "sentence_transformers"} & set(
        loaded["new"]["list"] + loaded["new"]["stats"]
    )
    assert result["files_changed_by_timed_runs"]["new"] == []
    assert "written:" in done.stdout and "first_search" in done.stdout
