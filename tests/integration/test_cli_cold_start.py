"""Issue 29, cold start: ``finderledge list``/``stats`` on a default index load neither the embedding model nor
the splitter nor LangChain's runnables; ``search`` loads the model but no splitter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

MODEL_OR_SPLITTER = (
    "langchain_text_splitters",
    "langchain_core.runnables",
    "finderledge.embeddings.factory",  # the package and its names module are light: the backends are not
    "finderledge.embeddings.onnx",
    "finderledge.embeddings.sentence_transformer",
    "finderledge.ingest.splitter",
    "onnxruntime",
    "tokenizers",
    "torch",
    "sentence_transformers",
    "transformers",
)
PROBE = (
    "import json, sys\nfrom finderledge.cli.commands import main\ncode = main(sys.argv[1:])\n"
    "print(json.dumps([code, sorted(sys.modules)]))"
)


def _loaded(*argv: str) -> set[str]:
    """The modules of MODEL_OR_SPLITTER a fresh interpreter holds after ``finderledge ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in MODEL_OR_SPLITTER)}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small default index (the bundled model, FAISS), built by the command line."""
    directory = tmp_path_factory.mktemp("cold") / "idx"
    texts = ("refunds within 30 days of purchase", "two years of warranty on batteries")
    built = subprocess.run(
        [sys.executable, "-m", "finderledge", "add", "--dir", str(directory), "--no-progress"]
        + [a for t in texts for a in ("--text", t)],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return directory


def test_list_and_stats_load_no_model_and_no_splitter(index: Path) -> None:
    assert _loaded("list", "--dir", str(index)) == set()
    assert _loaded("stats", "--dir", str(index)) == set()


def test_search_loads_the_model_but_no_splitter(index: Path) -> None:
    loaded = _loaded("search", "warranty", "--dir", str(index))
    assert "finderledge.embeddings.onnx" in loaded  # the probe sees what a command imports
    assert not {m for m in loaded if m.split(".")[0] == "langchain_text_splitters"}
    assert "finderledge.ingest.splitter" not in loaded
