"""The design's index command: ``python examples/jawiki/build_wiki_index.py --max 30000 --config 20231101.ja``.

Options as the design names them (``--max``, ``--config``, ``--chunk_size``, ``--overlap``, ``--out_dir``), run
as ``jawiki.py ingest`` then ``jawiki.py build-dev``: the index, ``wiki_metas.jsonl`` and ``dev.jsonl`` go to
``--out_dir`` (default ``$JAWIKI_WORKDIR``, else ``examples/jawiki/work``). Nothing is downloaded: the corpus is
JaQuAD's Japanese Wikipedia paragraphs (``--dataset``); ``--max`` counts articles, as the design's
``MAX_ARTICLES`` (the paragraphs of the first N articles are indexed); ``--config`` is recorded in ``ingest.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import jawiki


def paragraphs_of_first_articles(dataset: str, articles: int) -> int:
    """How many paragraphs, in file order, the first ``articles`` articles hold (JaQuAD groups them by article)."""
    seen: set[str] = set()
    paragraphs = jawiki.load_paragraphs(Path(dataset))
    for n, paragraph in enumerate(paragraphs):
        if paragraph.title not in seen and len(seen) == articles:
            return n
        seen.add(paragraph.title)
    return len(paragraphs)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--max", type=int, default=30000, help="articles to index at most (default 30000)")
    p.add_argument("--config", default="20231101.ja", help="the design's dump name (recorded; no download)")
    p.add_argument("--chunk_size", type=int, default=jawiki.CHUNK_SIZE)
    p.add_argument("--overlap", type=int, default=jawiki.CHUNK_OVERLAP)
    p.add_argument("--out_dir", default=str(jawiki.DEFAULT_WORKDIR))
    p.add_argument("--dataset", default=str(jawiki.DEFAULT_DATASET))
    p.add_argument(
        "--embedding", default=None, help="default: $FINDERLEDGE_EMBEDDING_MODEL, else multilingual"
    )
    a = p.parse_args(argv)
    limit = paragraphs_of_first_articles(a.dataset, a.max)
    common = ["--workdir", a.out_dir, "--dataset", a.dataset, "--limit", str(limit)]
    model = ["--embedding", a.embedding] if a.embedding else []
    ingest = ["ingest", *common, *model, "--chunk_size", str(a.chunk_size), "--overlap", str(a.overlap)]
    return jawiki.main([*ingest, "--config", a.config]) or jawiki.main(["build-dev", *common, *model])


if __name__ == "__main__":
    sys.exit(main())
