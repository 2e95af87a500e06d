"""Issue 29, cold start: ``import finderledge`` and a default directory's first search load no heavy package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HEAVY = (
    "chromadb",
    "torch",
    "sentence_transformers",
    "transformers",
    "faiss",
    "onnxruntime",
    "langchain_core",
)


def _loaded_after(code: str, *argv: str) -> set[str]:
    """The top-level packages of HEAVY a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], check=False, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1])) & set(HEAVY)


def test_import_finderledge_loads_no_heavy_package() -> None:
    assert _loaded_after("import finderledge") == set()
    assert _loaded_after("from finderledge import errors, Settings") == set()


def test_the_probe_sees_a_heavy_import() -> None:
    """The check above can fail: a package that is imported is reported."""
    assert _loaded_after("import finderledge.facade") >= {"langchain_core"}


def test_a_default_directory_searches_without_chroma_or_torch(tmp_path: Path) -> None:
    build = (
        "import sys\nfrom langchain_core.embeddings import DeterministicFakeEmbedding\n"
        "from finderledge import FinderLedge\n"
        "with FinderLedge(sys.argv[1], embedding=DeterministicFakeEmbedding(size=8), env_file=None) as fl:\n"
        "    fl.add_texts(['refunds within 30 days', 'two years of warranty'])\n"
    )
    assert "chromadb" not in _loaded_after(build, str(tmp_path / "idx"))
    search = build.replace("fl.add_texts(['refunds within 30 days', 'two years of warranty'])", "")
    search += "    assert len(fl.search('warranty', k=2)) == 2\n"
    loaded = _loaded_after(search, str(tmp_path / "idx"))
    assert "faiss" in loaded  # the default store did the vector leg
    assert not loaded & {"chromadb", "torch", "sentence_transformers", "transformers"}
