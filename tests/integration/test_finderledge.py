"""End-to-end behaviour of the facade, on the example folder, with real MiniLM, Chroma and FAISS."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import NO_CONTEXT, FinderLedge

PASSWORD_Q = "How long is a password reset link valid?"


def _name(result) -> str:  # type: ignore[no-untyped-def]
    return Path(result.metadata["source"]).name


def _all_ids(fl: FinderLedge) -> tuple[set[str], set[str], set[str]]:
    ledger_ids = {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
    return ledger_ids, fl.vector_store.ids(), fl.keyword_store.ids()


def test_folder_is_indexed_consistently(ledger: FinderLedge, example_dir: Path) -> None:
    sources = {Path(s).name for s in ledger.list_sources()}
    assert sources == {
        "getting-started.md",
        "billing-faq.md",
        "password-reset.txt",
        "sla-ja.md",
        "datacenter-ja.txt",
        "retry.py",
        "regions.json",
    }
    ledger_ids, vector_ids, keyword_ids = _all_ids(ledger)
    assert ledger_ids == vector_ids == keyword_ids
    assert ledger.count() == {"documents": 7, "chunks": len(ledger_ids)}
    types = {
        Path(d.metadata["source"]).suffix: d.metadata["doc_type_detected"] for d in ledger.list_documents()
    }
    assert types[".md"] == "markdown" and types[".py"] == "code" and types[".json"] == "json"


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_every_mode_finds_the_answer(ledger: FinderLedge, mode: str) -> None:
    results = ledger.search(PASSWORD_Q, search_mode=mode, k=3)
    assert _name(results[0]) == "password-reset.txt"
    assert [r.rank for r in results] == list(range(1, len(results) + 1))
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    top = results[0].info
    assert top["relevance_score"] == results[0].score
    assert ("vector_rank" in top) == (mode in ("hybrid", "vector"))
    assert ("keyword_rank" in top) == (mode in ("hybrid", "keyword"))
    if mode == "hybrid":
        assert top["vector_rank"] >= 1 and top["keyword_rank"] >= 1
        assert 0 < top["vector_score"] <= 1 and top["keyword_score"] > 0
    for r in results:  # the chunk schema is in every result: the loader's keys, then FinderLedge's own
        assert "source" in r.metadata and "doc_type_detected" in r.metadata
        for key in ("id", "is_parent", "parent_id", "split_index", "split_count", "doc_type"):
            assert key in r.info


def test_japanese_query_in_every_keyword_path(ledger: FinderLedge) -> None:
    for mode in ("keyword", "hybrid"):
        results = ledger.search("返金の申請期限はいつまでですか", search_mode=mode, k=3)
        assert _name(results[0]) == "sla-ja.md", mode
    top = ledger.search("大阪リージョンへの複製", search_mode="keyword", k=1)[0]
    assert _name(top) == "datacenter-ja.txt"


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_filter_applies_inside_every_leg(ledger: FinderLedge, mode: str) -> None:
    flt = {"doc_type_detected": "markdown"}
    # the best match overall is a .txt file; filtered, only Markdown may come back, and k of them
    results = ledger.search("bucket region upload refund password 返金", search_mode=mode, k=3, filter=flt)
    assert len(results) == 3
    assert all(r.metadata["doc_type_detected"] == "markdown" for r in results)
    one = ledger.search(
        PASSWORD_Q,
        search_mode=mode,
        k=5,
        filter={
            "$and": [{"doc_type_detected": {"$in": ["text", "code"]}}, {"file_name": "password-reset.txt"}]
        },
    )
    assert [_name(r) for r in one] == ["password-reset.txt"]
    assert ledger.search(PASSWORD_Q, search_mode=mode, filter={"file_name": "nope.md"}) == []


def test_bad_search_arguments(ledger: FinderLedge) -> None:
    with pytest.raises(ValueError, match="search_mode"):
        ledger.search("x", search_mode="semantic")
    with pytest.raises(ValueError, match="k"):
        ledger.search("x", k=0)
    with pytest.raises(ValueError, match="filter"):
        ledger.search("x", filter={"a": {"$regex": "x"}})
    assert ledger.search("   ") == []


def test_return_parents_deduplicates(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(embedding=minilm, chunk_size=120, chunk_overlap=0, vector_store="faiss")
    long_text = " ".join(f"Sentence {i} talks about solar panels and batteries." for i in range(20))
    ids = fl.add_texts([long_text, "Wind turbines generate power from wind."])
    assert len(fl.get_split_documents(ids[0])) > 3
    chunks = fl.search("solar panels batteries", k=4)
    assert len({r.metadata["_finderledge"]["parent_id"] for r in chunks}) == 1
    parents = fl.search("solar panels batteries", k=2, return_parents=True)
    assert [p.id for p in parents] == ids
    assert parents[0].content == long_text and parents[0].metadata["_finderledge"]["is_parent"] is True
    assert parents[0].metadata["_finderledge"]["matched_chunk_id"].startswith(ids[0])


def test_context_has_numbered_cited_passages(ledger: FinderLedge) -> None:
    ctx = ledger.get_context(PASSWORD_Q, k=2)
    assert ctx.startswith("[1] (source: ")
    assert "password-reset.txt" in ctx.split("\n")[0] and "chunk 1/1" in ctx.split("\n")[0]
    assert "valid for 30 minutes" in ctx
    assert "\n\n[2] (source: " in ctx
    assert ledger.get_context(PASSWORD_Q, filter={"file_name": "nope"}) == NO_CONTEXT
    assert ledger.get_context("qqqzzzxxy", search_mode="keyword") == NO_CONTEXT
    assert len(ledger.get_context(PASSWORD_Q, k=5, max_chars=300)) <= 300


def test_identical_content_is_stored_once(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "i", embedding=minilm, vector_store="faiss")
    first = fl.add_texts(["FinderLedge keeps one id per chunk."])
    again = fl.add_texts(["FinderLedge keeps one id per chunk."])
    doc = Document(page_content="Another note.", metadata={"source": "notes://1", "team": "ops"})
    assert fl.add_documents([doc, doc]) == fl.add_document(doc)
    assert first == again
    assert fl.count() == {"documents": 2, "chunks": 2}
    assert len(fl.vector_store) == len(fl.keyword_store) == 2
    stored = fl.get_document(fl.add_document(doc)[0])
    assert (
        stored is not None and stored.metadata["team"] == "ops" and stored.metadata["source"] == "notes://1"
    )
    fl.close()


def test_changed_file_replaces_old_chunks_everywhere(ledger: FinderLedge, example_dir: Path) -> None:
    path = example_dir / "guides" / "password-reset.txt"
    old_ids = ledger.add_document(path)
    old_chunks = {c.id for c in ledger.get_split_documents(old_ids[0])}
    before = ledger.count()
    path.write_text(
        "Password resets are handled by your administrator. Reset links expire after 2 hours.\n",
        encoding="utf-8",
    )
    report = ledger.ingest(path)
    assert report.replaced == old_ids and len(report.added) == 1
    assert ledger.count()["documents"] == before["documents"]
    ledger_ids, vector_ids, keyword_ids = _all_ids(ledger)
    assert ledger_ids == vector_ids == keyword_ids
    assert not old_chunks & (vector_ids | keyword_ids | ledger_ids)
    assert ledger.get_document(old_ids[0]) is None
    top = ledger.search("reset links expire after 2 hours administrator", search_mode="keyword", k=1)[0]
    assert _name(top) == "password-reset.txt" and "administrator" in top.content
    # unchanged re-ingest does nothing
    again = ledger.ingest(example_dir)
    assert again.added == [] and again.replaced == [] and len(again.unchanged) == 7


def test_remove_by_id_and_by_source(ledger: FinderLedge, example_dir: Path) -> None:
    before = ledger.count()
    with pytest.raises(KeyError, match="no-such-id"):
        ledger.remove_document("no-such-id")
    assert ledger.count() == before
    doc_id = ledger.add_document(example_dir / "regions.json")[0]
    chunk_ids = {c.id for c in ledger.get_split_documents(doc_id)}
    assert ledger.remove_document(doc_id) == [doc_id]
    ledger_ids, vector_ids, keyword_ids = _all_ids(ledger)
    assert not chunk_ids & (ledger_ids | vector_ids | keyword_ids)
    assert ledger_ids == vector_ids == keyword_ids
    removed = ledger.remove_document(str(example_dir / "guides" / "sla-ja.md"))
    assert len(removed) == 1
    assert ledger.count()["documents"] == before["documents"] - 2
    assert all(_name(r) != "sla-ja.md" for r in ledger.search("返金", k=10))
    assert ledger.get_document(doc_id) is None


def test_get_document_parent_and_splits(ledger: FinderLedge) -> None:
    hit = ledger.search(PASSWORD_Q, k=1)[0]
    chunk = ledger.get_document(hit.id)
    assert chunk is not None and chunk.page_content == hit.content
    parent = ledger.get_parent_document(hit.id)
    assert parent is not None and parent.id == hit.parent_id and parent.metadata["_finderledge"]["is_parent"]
    splits = ledger.get_split_documents(parent.id)
    assert [s.metadata["_finderledge"]["split_index"] for s in splits] == list(range(len(splits)))
    assert ledger.get_document("unknown") is None and ledger.get_split_documents("unknown") == []


def test_bad_inputs_are_named(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(embedding=minilm)
    with pytest.raises(FileNotFoundError, match="missing.pdf"):
        fl.add_document(tmp_path / "missing.pdf")
    with pytest.raises(FileNotFoundError, match="report.md"):
        fl.add_document("docs/report.md")
    with pytest.raises(ValueError, match="expected a file or directory path"):
        fl.add_document(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="_finderledge"):
        fl.add_document("text", metadata={"_finderledge": "x"})
    with pytest.raises(ValueError, match="empty"):
        fl.add_texts(["fine text", "   "])
    with pytest.raises(ValueError, match="empty"):
        fl.add_document(Document(page_content=""))
    assert fl.count() == {"documents": 0, "chunks": 0}
