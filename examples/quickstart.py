"""Index examples/data/ (Markdown, text, code, JSON, Japanese) and show hybrid results and a prompt context.

Run:  python examples/quickstart.py            (an in-memory index; nothing is downloaded)
      python examples/quickstart.py ./my-index (persist to a directory and reuse it next time)
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from finderledge import FinderLedge

HERE = Path(__file__).resolve().parent


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    persist = sys.argv[1] if len(sys.argv) > 1 else None
    with FinderLedge(persist) as ledger:
        report = ledger.ingest(HERE / "data")
        print(
            f"indexed {len(report.ids)} documents ({report.chunks_written} new chunks), "
            f"{len(report.skipped)} files skipped; store holds {ledger.count()}"
        )

        for question in (
            "How long is a password reset link valid?",
            "返金はいつまでに申請する必要がありますか？",
        ):
            print(f"\n=== hybrid search: {question}")
            for r in ledger.search(question, k=3):
                info = r.info  # FinderLedge's own fields: ids, position, leg ranks and scores
                print(
                    f"{r.rank}. {r.score:.4f}  {Path(r.metadata['source']).name} chunk {info['split_index'] + 1}/"
                    f"{info['split_count']}  vector_rank={info.get('vector_rank')} "
                    f"keyword_rank={info.get('keyword_rank')}"
                )
                print("   ", r.content[:100].replace("\n", " "), "...")

        question = "What does a refund cover and how do I ask for one?"
        print(f"\n=== context for: {question}\n")
        print(ledger.get_context(question, k=3))


if __name__ == "__main__":
    main()
