"""No thread outlives its owner at exit either (issue 39): a process that opens a directory, writes, searches and
exits without ``close()`` leaves no FinderLedge thread alive when the interpreter finalises — the library (the
ledger's WAL-checkpoint thread), the HTTP server (its indexing thread, its parent-watch thread) and the CLI.

Each process carries the exit probe of ``test_clean_exit.py`` (a ``sitecustomize`` whose ``atexit`` hook,
registered first, runs last) and prints the threads alive then.  Before: ``finderledge-wal-checkpoint`` alive in
every library run, ``finderledge-index`` in every server run, ``finderledge-parent-watch`` in every supervised
server run (even after the lifespan's shutdown), ``finderledge-heartbeat`` while its block ran elsewhere."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUNS = 3
PROBE = (
    "import atexit, sys, threading\n\n\ndef _exit_probe():\n"
    "    alive = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive())\n"
    '    sys.stderr.write(f"EXIT-PROBE {alive}\\n")\n\n\natexit.register(_exit_probe)\n'
)
OPEN = """
import sys, threading, time
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], embedding=DeterministicFakeEmbedding(size=16), vector_store="faiss",
                 show_progress=False, env_file=None)
"""
LIBRARY = (
    OPEN
    + """
fl.add_texts([f"Report {i}: the keeper counted seven pear trees near river bend {i}." for i in range(40)])
print("searched", len(fl.search("pear trees", k=3)))
"""
)
SERVER = (
    OPEN
    + """
import os
from fastapi.testclient import TestClient
from finderledge.server import ServerConfig, create_app
if sys.argv[2] == "supervised":
    os.environ["FINDERLEDGE_SERVER_SUPERVISED"] = "1"
app = create_app(ServerConfig(directory=sys.argv[1]), ledger=fl)
def use(client):
    up = client.post("/api/v1/documents", files={"file": ("faq.md", b"# Refunds\\n\\nA refund within 30 days.\\n")})
    assert up.status_code == 201, up.text
    found = client.post("/api/v1/search", json={"query": "refund", "top_k": 1})
    print("searched", len(found.json()["results"]), found.status_code)
if sys.argv[2] == "supervised":
    with TestClient(app) as client:  # the lifespan runs: it starts the parent watch, and ends
        use(client)
else:
    use(TestClient(app))  # no lifespan: the app is never shut down
"""
)
HEARTBEAT = """
import threading, time
from finderledge.progress import heartbeat
def work():
    with heartbeat("a long export", interval=0.05):
        time.sleep(3600)  # a step that never ends before the process does
threading.Thread(target=work, name="user-work", daemon=True).start()
time.sleep(0.3)
print("searched 1")
"""


@pytest.fixture
def env(tmp_path: Path, session_cache: Path) -> dict[str, str]:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(PROBE, encoding="utf-8")
    keep = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_")}
    path = os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH", "")) if p)
    return {**keep, "FINDERLEDGE_CACHE_DIR": str(session_cache), "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}


def _alive_at_exit(argv: list[str], env: dict[str, str], expect: str = "searched") -> list[str]:
    """Run ``argv``; it must exit 0 printing ``expect``; the FinderLedge threads alive at finalisation."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert expect in done.stdout + done.stderr, done.stdout[-2000:]
    probes = [line for line in done.stderr.splitlines() if line.startswith("EXIT-PROBE")]
    assert len(probes) == 1, done.stderr[-3000:]
    names = ast.literal_eval(probes[0].removeprefix("EXIT-PROBE "))
    return [name for name in names if name.startswith("finderledge")]


@pytest.mark.parametrize("entry", ["library", "server", "server-supervised", "heartbeat"])
def test_no_finderledge_thread_alive_at_finalisation(entry: str, tmp_path: Path, env: dict[str, str]) -> None:
    seen = []
    for run in range(RUNS):
        directory = str(tmp_path / f"ix{run}")
        if entry == "library":
            argv = [sys.executable, "-c", LIBRARY, directory]
        elif entry == "heartbeat":
            argv = [sys.executable, "-c", HEARTBEAT]
        else:
            argv = [sys.executable, "-c", SERVER, directory, entry.removeprefix("server-")]
        seen.append(_alive_at_exit(argv, env))
    assert seen == [[]] * RUNS, seen


def test_cli_add_then_search_leaves_no_thread(tmp_path: Path, env: dict[str, str]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "faq.md").write_text(
        "# Refunds\n\nA refund must be requested within 30 days.\n", encoding="utf-8"
    )
    index = str(tmp_path / "index")
    finderledge = [sys.executable, "-m", "finderledge"]
    assert _alive_at_exit(finderledge + ["add", str(docs), "--dir", index, "--no-progress"], env, "1") == []
    assert _alive_at_exit(finderledge + ["search", "refund", "-k", "1", "--dir", index], env, "faq.md") == []
