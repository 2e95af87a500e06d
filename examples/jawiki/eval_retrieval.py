"""The design's Recall@K script: ``python examples/jawiki/eval_retrieval.py`` (K=5, over ``dev.jsonl``).

Runs ``jawiki.py eval`` over ``--out_dir`` (default ``$JAWIKI_WORKDIR``, else ``examples/jawiki/work``): Recall@5
on the design's ``jawiki:<title>#<cid>`` gold ids for hybrid, vector and keyword search, and the not-found
rates; the report goes to ``eval.json`` there. Below the design's 0.6 it says so, with what to try.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import jawiki

THRESHOLD = 0.6  # the design's acceptance level for Recall@5


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out_dir", default=str(jawiki.DEFAULT_WORKDIR))
    a, rest = p.parse_known_args(argv)
    code = jawiki.main(["eval", "--workdir", a.out_dir, *rest])
    report = json.loads((Path(a.out_dir) / "eval.json").read_text(encoding="utf-8"))
    recall = report["modes"][next(iter(report["modes"]))]["recall@5"]
    if recall >= THRESHOLD:
        print(f"Recall@5 {recall:.3f} >= {THRESHOLD}: meets the design's criterion")
    else:
        print(
            f"Recall@5 {recall:.3f} < {THRESHOLD}: below the design's criterion; try --mode hybrid, a larger "
            "--topk with a --reranker, or smaller chunks (--chunk_size)"
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
