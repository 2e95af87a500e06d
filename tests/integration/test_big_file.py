"""Issue 27, item 5: one big file ingests in bounded memory and stays all-or-nothing across a SIGKILL.

Both tests run real processes on real files with the FAISS index.  The embedding is LangChain's deterministic
fake (the model is not what is measured or killed here: the pipeline is).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from texts import paragraphs

from finderledge import FinderLedge

# index argv[2] into argv[1]; with argv[3] = N > 0 the process SIGKILLs itself at its N-th embedding call
SCRIPT = textwrap.dedent(
    """
    import json, os, signal, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from finderledge import FinderLedge
    from finderledge.ingest import write as ingest

    ingest.STREAM_DOCUMENT_CHARS = 20_000  # this file (~150 KB) takes the streaming path
    ingest.STREAM_WINDOW_CHARS = 10_000

    class Killing(DeterministicFakeEmbedding):
        calls: int = 0
        def embed_documents(self, texts):
            self.calls += 1
            if self.calls == int(sys.argv[3]):
                os.kill(os.getpid(), signal.SIGKILL)
            return super().embed_documents(texts)

    with FinderLedge(sys.argv[1], embedding=Killing(size=16), vector_store="faiss", show_progress=False,
                     env_file=None, embedding_batch_size=16) as fl:
        report = fl.ingest(sys.argv[2])
        print(json.dumps({"count": fl.count(), "cached": report.embeddings_cached,
                          "computed": report.embeddings_computed}))
    """
)

# argv[1] file, argv[2] index: peak RSS growth of one add_document after a warmed-up open, in MB
MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from finderledge import FinderLedge

    def status(key):
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith(key)) // 1024

    with FinderLedge(sys.argv[2], embedding=DeterministicFakeEmbedding(size=16), vector_store="faiss",
                     show_progress=False, env_file=None) as fl:
        fl.add_texts(["warm up every code path once: a short note"])
        fl.search("note", k=1)
        base = status("VmRSS")
        fl.add_document(sys.argv[1])
        print(json.dumps({"base": base, "peak": status("VmHWM"), "count": fl.count()}))
    """
)


def _write_text(path: Path, chars: int, seed: int = 5) -> Path:
    """Paragraphs of random words, ``chars`` characters in all."""
    written = 0
    with path.open("w", encoding="utf-8") as fh:
        for para in paragraphs(seed):
            if written >= chars:
                break
            fh.write(para + "\n\n")
            written += len(para) + 2
    return path


class Killing(DeterministicFakeEmbedding):
    """The script's model class by name (a directory records the model it was built with), never killing."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=300,
    )


def test_sigkill_mid_file_then_rerun_finishes(tmp_path: Path) -> None:
    big = _write_text(tmp_path / "big.txt", 150_000)
    index = tmp_path / "idx"
    killed = _run(str(index), str(big), "5")  # killed after some windows were staged
    assert killed.returncode == -9, killed.stderr
    con = sqlite3.connect(index / "ledger.sqlite3")
    staged_chunks = con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
    assert con.execute("SELECT COUNT(*) FROM info WHERE key LIKE 'staged:%'").fetchone()[0] == 1
    assert con.execute("SELECT COUNT(*) FROM changes").fetchone()[0] == 0
    con.close()
    assert staged_chunks > 0  # rows were staged before the kill ...
    with FinderLedge(  # ... and no search, count or index of another process sees them
        index,
        embedding=Killing(size=16),
        vector_store="faiss",
        show_progress=False,
        env_file=None,
    ) as fl:
        assert fl.count() == {"documents": 0, "chunks": 0}
        assert fl.search("warehouse invoice", k=5) == []
    done = _run(str(index), str(big), "0")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["count"]["documents"] == 1 and out["count"]["chunks"] > staged_chunks
    assert out["cached"] > 0  # the windows embedded before the kill are not embedded again
    con = sqlite3.connect(index / "ledger.sqlite3")
    assert con.execute("SELECT COUNT(*) FROM info WHERE key LIKE 'staged:%'").fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] == out["count"]["chunks"]
    con.close()
    with FinderLedge(
        index,
        embedding=Killing(size=16),
        vector_store="faiss",
        show_progress=False,
        env_file=None,
    ) as fl:
        assert fl.count() == out["count"]
        assert len(fl.search("warehouse invoice", k=3)) == 3


@pytest.mark.slow
def test_a_20_mb_file_ingests_in_bounded_memory(tmp_path: Path) -> None:
    """Before streaming, RSS grew by ~325 MB for this file (~25,000 chunks, 16-d vectors); now ~115 MB: the
    text itself, one window of chunks, and the compact indexes."""
    big = _write_text(tmp_path / "big.txt", 20_000_000)
    done = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-c", MEMORY_SCRIPT, str(big), str(tmp_path / "idx")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["count"]["chunks"] > 20_000
    assert out["peak"] - out["base"] < 200, out
