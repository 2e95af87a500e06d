"""The design's one-shot QA: ``python examples/jawiki/rag_wiki.py --q "大政奉還の概要を一言で。" --topk 16 --topn 5 --no-rerank``.

Runs ``jawiki.py ask`` over the index ``build_wiki_index.py`` wrote (``--out_dir``, default ``$JAWIKI_WORKDIR``,
else ``examples/jawiki/work``): the answer, a blank line, then ``参照: [0] jawiki:<title>#chunk=<n>, …``.
The LLM is ``--llm`` or ``$LLM`` (none: an extractive answer); the embedding model ``--embedding`` or
``$FINDERLEDGE_EMBEDDING_MODEL``; the reranker ``--reranker`` or ``$RERANKER`` (``--no-rerank``: none).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import jawiki


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--q", required=True, help="the question")
    p.add_argument("--out_dir", default=str(jawiki.DEFAULT_WORKDIR))
    a, rest = p.parse_known_args(
        argv
    )  # --topk, --topn, --no-rerank, --llm, --embedding … go to ask as they are
    return jawiki.main(["ask", a.q, "--workdir", a.out_dir, *rest])


if __name__ == "__main__":
    sys.exit(main())
