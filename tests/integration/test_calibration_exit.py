"""Issue 42: the background calibration never outlives its process's interpreter.  A script that writes and
exits without ``close()`` while the calibration measures (inside the model's ``embed`` call) exits 0 at once:
the ``atexit`` hook stops it between two batches and joins it, so its thread is not alive when the interpreter
finalises (the probe of ``test_clean_exit.py``); and ``close()`` finishes it and joins it.  (A writer that exits
without ``close()`` also leaves the ledger's WAL-checkpoint daemon alive there: not this issue's thread.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

RUNS = 5
PROBE = (
    "import atexit, sys, threading\n\n\ndef _exit_probe():\n"
    "    alive = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive())\n"
    '    sys.stderr.write(f"EXIT-PROBE {alive}\\n")\n\n\natexit.register(_exit_probe)\n'
)
SCRIPT = """
import sys, time
from langchain_core.embeddings import DeterministicFakeEmbedding
import finderledge.ranking.calibration as calibration
from finderledge import FinderLedge

class Slow(DeterministicFakeEmbedding):
    delay: float = 0.0
    def embed_documents(self, texts):
        time.sleep(self.delay * len(texts))
        return super().embed_documents(texts)
    def embed_query(self, text):
        time.sleep(self.delay)
        return super().embed_query(text)

calibration.QUIET_S = 0.0
model = Slow(size=16)
fl = FinderLedge(sys.argv[1], embedding=model, vector_store="faiss", show_progress=False, env_file=None)
fl.add_texts([f"Report {i} describes the orchard near river bend {i}. The keeper counted seven pear trees."
              for i in range(200)])
model.delay = 0.2  # 80 texts to embed: 16 s of calibration
time.sleep(0.5)
assert fl.engine.calibrator.pending
print("searched", len(fl.search("orchard", k=3)))
if sys.argv[2] == "close":
    fl.close()
    again = FinderLedge(sys.argv[1], embedding=model, show_progress=False, env_file=None)
    print("stored", again.engine.ledger.get_info(calibration.INFO_KEY) is not None)
    again.close()
print("ended at", time.time(), flush=True)
"""


@pytest.mark.parametrize("ending", ["exit", "close"])
def test_a_process_writing_then_ending_leaves_no_calibration_thread(tmp_path: Path, ending: str) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(PROBE, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH")) if p),
    }
    for run in range(RUNS if ending == "exit" else 1):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / f"ix{run}"), ending],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        exited = time.time()
        assert done.returncode == 0, done.stderr[-3000:]
        assert "searched 3" in done.stdout
        probes = [line for line in done.stderr.splitlines() if line.startswith("EXIT-PROBE")]
        assert len(probes) == 1 and "finderledge-calibration" not in probes[0], done.stderr[-3000:]
        if (
            ending == "exit"
        ):  # stopped between two model calls (0.8 s at most), not measured to the end (16 s)
            ended = float(done.stdout.split("ended at ")[1].split()[0])
            assert exited - ended < 8, exited - ended
        else:
            assert "stored True" in done.stdout  # close() finished the calibration the write made due
