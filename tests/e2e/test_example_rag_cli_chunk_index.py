"""Issue 44, design 000 (../shared/seeds/000_6ed26c20f18e0c60.txt): the chunks carry ``chunk_index``.

The design's section 4.7 writes the chunks' metadata::

    | source | str | ソースID（上記命名規則に従う） |
    | chunk_index | int | 同一ソース内でのチャンク連番（0始まり） |

and its ingest flow (14.1): "6. 各チャンクに source, chunk_index メタデータを付与".  The example's graph hands
the design's ``documents`` (the retrieve node's chunks) to the rerank node; they carried FinderLedge's
``_finderledge.split_index`` only.  A PDF page and a CSV row are one FinderLedge document each, so
``split_index`` is the chunk's number within its source id (``file.pdf:p1``): the graph now sets the design's
``chunk_index`` from it, and the design's ``rerank`` dicts carry it too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

pytest.importorskip("langgraph")

EXAMPLE = ROOT / "examples" / "rag_cli"


@pytest.fixture
def graph() -> Iterator[Any]:
    """The example's ``graph`` module, importable by its plain name for the test (LangGraph reads the state's
    type hints from the module), removed after it."""
    import importlib

    before = set(sys.modules)
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield importlib.import_module("graph")
    finally:
        sys.path.remove(str(EXAMPLE))
        for plain in {"graph", "settings", "rag_cli", "metrics"} - before:
            sys.modules.pop(plain, None)


def test_every_retrieved_chunk_carries_source_and_chunk_index(tmp_path: Path, graph: Any) -> None:
    index = tmp_path / "index"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DB_", "CHUNK_", "LLM", "RERANK"))}
    env["CHUNK_SIZE"] = "120"  # small chunks: several per page and per long row
    env["CHUNK_OVERLAP"] = "20"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE / "rag_cli.py"), "--index", str(index), "ingest", str(EXAMPLE / "data")],
        cwd=tmp_path,  # no .env of the repository's
        env={**env, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr

    from finderledge import FinderLedge

    with FinderLedge(index, show_progress=False) as ledger:
        total = ledger.count()["chunks"]
        reranker, _ = graph.make_reranker("fused", ledger)
        app = graph.build_graph(ledger, reranker, None, search_k=total, rerank_top_k=3)
        state = app.invoke({"query": "保証期間は何年ですか？"})
    documents = state["documents"]
    assert len(documents) == total  # every chunk of the index, so each source's numbering is complete
    by_source: dict[str, list[int]] = defaultdict(list)
    for doc in documents:
        assert isinstance(doc.metadata["chunk_index"], int)
        by_source[doc.metadata["source_id"]].append(doc.metadata["chunk_index"])
    # "同一ソース内でのチャンク連番（0始まり）": 0, 1, … within each source id
    assert all(sorted(numbers) == list(range(len(numbers))) for numbers in by_source.values()), by_source
    assert any(len(numbers) > 1 for numbers in by_source.values())  # some page was split
    assert {s.split(":")[-1][0] for s in by_source} == {"p", "r"}  # PDF pages and CSV rows
    # the reranked documents keep it, and the design's rerank dicts carry it
    assert all(isinstance(d.metadata["chunk_index"], int) for d in state["reranked_documents"])
    best = graph.rerank(
        "q",
        [
            {"content": d.page_content, "source": d.metadata["source_id"], "chunk_index": 0}
            for d in documents[:2]
        ],
        1,
        reranker=reranker,
    )
    assert best[0]["chunk_index"] == 0
