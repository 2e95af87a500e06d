"""benchmarks/bench_embedding_cost.py and bench_chunk_size.py on tiny inputs (issue 29, embedding cost in real use).

The cost benchmark runs end to end in a fresh process on 8 scifact documents, one round: FinderLedge's real
default ingest, then LangChain's HuggingFaceEmbeddings on the same texts and on one text per document. The test
checks that the peer embedded exactly the passages FinderLedge embedded (its stored chunks, then calibration's
held-out rests), that the default model really ran, and that every figure is sane.  The chunk-size helpers are checked on a small BEIR subset without a model.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from paths import dataset

ROOT = Path(__file__).resolve().parents[2]
COST = ROOT / "benchmarks" / "bench_embedding_cost.py"
CHUNK = ROOT / "benchmarks" / "bench_chunk_size.py"


def _module(path: Path) -> Any:
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_chunk_size_counts_and_beir_subset_round_trip(tmp_path: Path) -> None:
    """Texts per document fall as the chunk size grows; a subset written as BEIR reads back the same."""
    bench = _module(CHUNK)
    full = bench.load_beir(dataset("scifact"))
    small = bench.subset(full, 60, 10)
    row = bench.counts(small, [1000, 2000])
    assert row["documents"] == len(small.corpus) == 60
    assert row["1000"]["texts"] > row["2000"]["texts"] >= 60  # scifact abstracts exceed 1,000 characters
    back = bench.load_beir(bench.write_beir(small, tmp_path / "small"))
    assert back.corpus == small.corpus and back.queries == small.queries and back.qrels == small.qrels


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_tiny_cost_run_writes_every_figure(tmp_path: Path) -> None:
    folder = dataset("scifact")  # skips (CI: fails) when the shared dataset is missing
    out = tmp_path / "cost.json"
    command = [sys.executable, str(COST), "--documents", "8", "--rounds", "1", "--dataset", str(folder)]
    command += ["--out", str(out)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        command, check=False, capture_output=True, text=True, timeout=580, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["documents"] == 8 and result["rounds"] == 1 and result["threads"] >= 1
    s = result["summary"]
    fl, same, whole = s["finderledge"], s["peer_same_texts"], s["peer_whole_documents"]
    ingest = result["runs"]["finderledge"][0]
    assert (
        same["texts"] == fl["texts"] >= ingest["chunks_stored"]
    )  # chunks, then calibration's held-out rests
    assert (
        ingest["chunks_stored"] > whole["texts"] == 8
    )  # scifact abstracts are split; the peer embeds one each
    assert fl["chunks_per_document"] == round(ingest["chunks_stored"] / 8, 3)
    for row in (fl, same, whole):
        assert row["passages_per_s"] > 0 and row["wall_ms_per_document"] > 0
    assert result["runs"]["finderledge"][0]["model"] == "OnnxEmbeddings"  # the default model, really
    assert s["ratios"]["chunks_finderledge_over_peer_whole"] == round(ingest["chunks_stored"] / 8, 2)
    assert result["peer_truncation"]["whole_documents"]["max_seq_length"] == 256
    assert "load average" in result["uptime_before"]
    assert result["table_markdown"] in done.stdout
