"""A small built corpus and its search rankings (ids, order, scores, texts) in every mode, at k=10 and k=100:
``search_rankings_41.json`` holds them as the tree before issue 41's query-path work computed them, and
tests/unit/test_search_rankings_41.py checks the current tree gives the same.

Scores are recorded to :data:`DIGITS` significant digits: OpenBLAS picks its kernels by CPU (SkylakeX's
AVX-512 or Haswell's AVX2), which sum a product in another order, so the last bits of a score differ from one
machine to another (on an AVX-512 machine 17 of the 132 rankings differed in the 16th-17th digit from those
recorded on an AVX2 one, ids, order and texts the same; with ``OPENBLAS_CORETYPE=Haswell`` they were equal).

    PYTHONPATH=<a FinderLedge src> python tests/helpers/search_rankings.py OUT.json   # record them
"""

from __future__ import annotations

import json
import random
import sys
import zlib
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("search_rankings_41.json")
DIGITS = 9  # significant digits of a score compared (a float64 carries 15-17; CPUs differ in 1-2)


def _rounded(score: float | None) -> str | None:
    return None if score is None else f"{score:.{DIGITS}g}"


_WORDS = [f"w{i}" for i in range(150)] + ["tide", "glacier", "river", "delta", "moraine", "estuary"]


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(_WORDS[: rng.randint(5, len(_WORDS))]) for _ in range(rng.randint(4, 40)))
        for _ in range(n)
    ]


def rankings(directory: Path) -> dict[str, Any]:
    """Build the corpus in ``directory`` (several adds, a removal, a replacement) and record its rankings."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from finderledge import FinderLedge

    texts = _texts(900, 7)
    out: dict[str, Any] = {}
    with FinderLedge(
        directory, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    ) as fl:
        for start in range(0, 800, 200):
            fl.add_texts(
                texts[start : start + 200],
                metadatas=[{"n": i % 5} for i in range(start, start + 200)],
                ids=[f"d{i:04d}" for i in range(start, start + 200)],
            )
        fl.add_texts(texts[800:], ids=[f"d{i:04d}" for i in range(800, 900)])
        fl.delete([f"d{i:04d}" for i in range(0, 900, 17)])
        fl.add_texts(["tide glacier river replaced"], ids=["d0005"])
        fl.wait_for_calibration()  # adaptive fusion's weights: the calibration's, not a race with it
        for q in _texts(8, 8) + ["tide glacier", "w1 w2 w3", "moraine estuary delta"]:
            for mode in ("keyword", "hybrid", "vector"):
                for k in (10, 100):
                    for flt in (None, {"n": 2}):
                        got = fl.search(q, k=k, search_mode=mode, filter=flt)
                        ranking = [
                            [r.id, _rounded(r.score), _rounded(r.info.get("fusion_score"))] for r in got
                        ]
                        out[f"{mode}|{k}|{flt}|{q}"] = [
                            len(got),
                            ranking[:3],  # in clear, for a failure's message; all of it in the CRC
                            zlib.crc32(json.dumps(ranking).encode()),  # ids, order, scores (DIGITS digits)
                            zlib.crc32("\x00".join(r.content for r in got).encode()),  # the texts
                        ]
    return out


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        Path(sys.argv[1]).write_text(json.dumps(rankings(Path(tmp) / "index"), indent=0) + "\n")
