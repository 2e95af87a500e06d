"""Issue 41: a fresh process's peak memory while it opens a FAISS store holds the vectors once, as the floor's
``faiss.read_index`` does.

Opening copied each segment's ``vectors.npy`` into the index from a memory map, and every mapped page stayed
counted in the process's memory (RSS) until all segments were copied: the peak held the vectors twice (1M
chunks: the first search's peak RSS 1.32x the floor's).  The vectors are now read into the index's storage.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from finderledge.vector_stores.faiss import FaissVectorStore

D = 384
ROWS = 48_000  # 63 MB of float32 vectors (after the deletions): well above the interpreter's own noise
MIB = 2**20

pytestmark = pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc/self/status")

CHILD = textwrap.dedent(
    """
    import json, sys
    import faiss
    import numpy as np
    from finderledge.vector_stores.faiss import FaissVectorStore

    def kib(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    before = kib("VmRSS")  # the imports done: the high-water mark below is the open's own growth
    store = FaissVectorStore(sys.argv[1], dimension=int(sys.argv[2]))
    query = np.ones(int(sys.argv[2]), dtype=np.float32)
    found = store.search(query, 3)
    print(json.dumps({"before_kib": before, "peak_kib": kib("VmHWM"), "rows": len(store), "found": len(found)}))
    """
)


def test_a_fresh_process_opening_a_store_holds_its_vectors_once_at_its_peak(tmp_path: Path) -> None:
    rng = np.random.default_rng(41)
    store = FaissVectorStore(tmp_path / "faiss", dimension=D)
    for lo in range(0, ROWS, 12_000):  # four segments, as a build's flushes leave them
        hi = lo + 12_000
        store.add(
            [f"c{i}" for i in range(lo, hi)],
            rng.standard_normal((hi - lo, D), dtype=np.float32),
            [{}] * (hi - lo),
        )
        store.flush()
    store.delete([f"c{i}" for i in range(0, ROWS, 7)])  # dead rows: read through the scratch block, not kept
    store.flush()
    live = len(store)
    del store
    vector_bytes = live * D * 4
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "faiss"), str(D)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["rows"] == live and got["found"] == 3
    grown = (got["peak_kib"] - got["before_kib"]) * 1024
    # the index's own copy (with its room for later adds, 1/32) and small blocks: not a second copy
    assert grown < 1.45 * vector_bytes, (
        f"opening {live} vectors ({vector_bytes / MIB:.0f} MiB) grew the peak RSS by {grown / MIB:.0f} MiB"
    )
