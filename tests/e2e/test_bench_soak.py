"""benchmarks/bench_soak.py at a tiny size: two writers a store for a few seconds, SIGKILLed while they write,
on FinderLedge and every peer installed (Chroma, qdrant-client local, LanceDB). Every figure the docs publish is
in the JSON; FinderLedge loses and duplicates nothing, its directory opens, its legs agree and check is clean.
The peers' figures are measured, not asserted (what they do under many writers is the benchmark's finding)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUND_FIELDS = ("returned", "lost", "duplicated", "unconfirmed_present", "opens", "kills", "write_errors")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tiny_soak_counts_every_store(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_soak.py"), "--writers", "2", "--seconds", "8"]
    command += [
        "--rounds",
        "1",
        "--max-kills",
        "3",
        "--kill-min",
        "0.5",
        "--kill-max",
        "1.5",
        "--out",
        str(out),
    ]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=880, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result == json.loads(done.stdout.strip().splitlines()[-1])
    assert set(result["stores"]) | set(result["skipped"]) == {"finderledge", "chroma", "qdrant", "lancedb"}
    assert {"finderledge", "chroma", "qdrant"} <= set(result["stores"])  # installed by the dev extra
    for name, store in result["stores"].items():
        assert store["note"] and store["total"]["rounds"] == 1, name
        (figures,) = store["rounds"]
        for key in ROUND_FIELDS:
            assert key in figures, (name, key)
        assert figures["opens"] or figures["error"], name  # a directory that does not open says why
    fl = result["stores"]["finderledge"]["total"]
    assert fl["returned"] > 0, fl
    assert (fl["lost"], fl["duplicated"], fl["unopenable"], fl["crashed"]) == (0, 0, 0, 0), fl
    assert fl["consistent"] and fl["check_clean"] and fl["not_searchable"] == 0, fl
