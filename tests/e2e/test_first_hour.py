"""Issue 12, the first hour with the library: paths and text are separate inputs, every result has a source,
opening a directory to read never writes to it, the embedding model loads on first use, and small
surprises (a context capped below its first citation) are gone.  CLI items: test_cli.py, test_cli_errors.py;
README and docs samples: test_doc_samples.py."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.errors import DocumentNotFoundError, SourceNotFoundError

TRICKY_TEXTS = [
    "料金は月額1000円/ユーザーです。",
    "The settings live in config.json",
    "https://example.com/a/b?c=d#e",
    "docz",
]


def test_a_string_is_a_path_and_a_missing_one_is_an_error(minilm) -> None:
    fl = FinderLedge(embedding=minilm, show_progress=False)
    for text in TRICKY_TEXTS:
        with pytest.raises(SourceNotFoundError) as err:
            fl.add_document(text)
        assert repr(text) in str(err.value) and "add_texts" in str(err.value)  # named as given, not mangled
    assert fl.count() == {"documents": 0, "chunks": 0}  # the typo was not indexed as text
    ids = fl.add_texts(TRICKY_TEXTS, metadatas=[{"n": i} for i in range(4)])
    assert [fl.get_document(i).page_content for i in ids] == TRICKY_TEXTS  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="texts"):
        fl.add_texts("one string, not a list")
    with pytest.raises(ValueError, match="metadatas"):
        fl.add_texts(["a", "b"], metadatas=[{}])
    fl.close()


def test_every_result_has_a_source(minilm, tmp_path: Path) -> None:
    (tmp_path / "faq.md").write_text("# FAQ\n\nRefunds take five business days.\n", encoding="utf-8")
    fl = FinderLedge(embedding=minilm, show_progress=False)
    [raw] = fl.add_texts(["Refunds of raw text take ten days."])
    fl.add_texts(["Refunds named by the caller take two days."], metadatas=[{"source": "handbook"}])
    fl.add_document(tmp_path / "faq.md")
    sources = {r.source for r in fl.search("refunds days", k=3)}
    assert sources == {f"text:{raw}", "handbook", str((tmp_path / "faq.md").absolute())}
    assert all(r.to_dict()["source"] for r in fl.search("refunds", k=3))
    fl.close()


def test_raw_text_shows_one_source_on_every_surface(
    minilm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from finderledge.cli.commands import main
    from finderledge.evaluation import gold_matches
    from finderledge.metadata import source_of
    from finderledge.rag.context import citation_fields, format_context

    with FinderLedge(tmp_path / "idx", embedding=minilm, vector_store="faiss", show_progress=False) as fl:
        [raw] = fl.add_texts(["Refunds of raw text take ten days."], metadatas=[{"lang": "en"}])
        [named] = fl.add_texts(
            ["Refunds named by the caller take two days."], metadatas=[{"source": "handbook"}]
        )
        want = f"text:{raw}"
        [hit] = fl.search("refunds raw text ten days", k=1, filter={"lang": "en"})
        assert (hit.source, hit.to_dict()["source"], source_of(hit.metadata)) == (want, want, want)
        assert "source" not in hit.metadata  # computed, never stored: the caller's metadata stays as given
        assert fl.get_context(results=[hit]).startswith(f"[1] (source: {want}, chunk 1/1)\n")
        assert fl.get_context(results=[hit], citation="{source}#{chunk}").startswith(f"[1] ({want}#1)")
        assert citation_fields(hit.metadata)["source"] == want
        docs = fl.as_retriever(k=1, filter={"lang": "en"}).invoke("refunds raw text")
        assert format_context(docs).startswith(f"[1] (source: {want}, chunk 1/1)")
        [vs_doc] = fl.as_vectorstore().similarity_search("refunds raw text", k=1, filter={"lang": "en"})
        assert vs_doc.metadata == {"lang": "en"}  # the LangChain contract: exactly the caller's metadata
        assert format_context([vs_doc]).startswith(f"[1] (source: {want}")  # the Document's id stands in
        assert gold_matches(want, hit.metadata)  # a gold id copied from a result matches it
        named_hit = fl.search("named by the caller", k=1, filter={"source": "handbook"})[0]
        assert named_hit.source == "handbook" and named_hit.parent_id == named
    capsys.readouterr()
    assert main(["list", "--dir", str(tmp_path / "idx")]) == 0
    listed = capsys.readouterr().out
    assert f"{raw}  {want} " in listed and f"{named}  handbook " in listed and "(text)" not in listed
    assert main(["list", "--dir", str(tmp_path / "idx"), "--json"]) == 0
    assert {d["source"] for d in json.loads(capsys.readouterr().out)} == {want, "handbook"}
    assert (
        main(["search", "raw text ten days", "--dir", str(tmp_path / "idx"), "-k", "1", "-m", "keyword"]) == 0
    )
    assert f"(source: {want}, chunk 1/1)" in capsys.readouterr().out


# FinderLedge's own files in chroma/: its per-call OS lock, the lock's owner note, the change counter
OUR_CHROMA_FILES = {"write.lock", "write.lock.owner", "generation"}


def _fingerprint(directory: Path) -> dict[str, str]:
    """Every file FinderLedge writes under ``directory`` with a hash of its bytes: the ledger, BM25 and FAISS,
    the lock's owner notes, and its own files in chroma/ (left out: SQLite's -shm index, and Chroma's own files,
    which Chroma's client itself rewrites when it opens them: README, Configuration)."""
    out = {}
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        ours = rel.parts[0] != "chroma" or (len(rel.parts) == 2 and rel.name in OUR_CHROMA_FILES)
        if path.is_file() and not path.name.endswith("-shm") and ours:
            out[str(path.relative_to(directory))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_opening_to_read_never_writes(
    minilm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store_kind: str
) -> None:
    directory = tmp_path / "idx"
    other = {"chroma": "faiss", "faiss": "chroma"}[store_kind]
    with FinderLedge(directory, embedding=minilm, vector_store=store_kind, show_progress=False) as fl:
        fl.add_texts(["Refunds take five business days.", "Password links last thirty minutes."])
    before = _fingerprint(directory)
    (tmp_path / ".env").write_text("FINDERLEDGE_CHUNK_SIZE=300\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FINDERLEDGE_VECTOR_STORE", other)
    with FinderLedge(directory, embedding=minilm, show_progress=False) as fl:
        assert (fl.settings.vector_store, fl.settings.chunk_size) == (store_kind, 1000)  # as built
        assert fl.count()["documents"] == 2 and fl.list_documents() and fl.stats()["vector_index_chunks"] == 2
        assert fl.search("refunds", search_mode="keyword", k=1) and fl.search("refunds", k=1)
    assert not (directory / other).exists()
    if store_kind == "chroma":  # the note a write left is there, and reads did not rewrite it
        assert "chroma/write.lock.owner" in before
    assert _fingerprint(directory) == before
    db = sqlite3.connect(directory / "ledger.sqlite3")
    recorded = json.loads(db.execute("SELECT value FROM info WHERE key='settings'").fetchone()[0])
    db.close()
    assert (recorded["vector_store"], recorded["chunk_size"]) == (store_kind, 1000)


def test_an_argument_still_switches_the_vector_store_and_records_it(minilm, tmp_path: Path) -> None:
    with FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False) as fl:
        fl.add_texts(["Refunds take five business days."])
    with FinderLedge(tmp_path / "idx", embedding=minilm, vector_store="faiss", show_progress=False) as fl:
        assert fl.search("refunds", search_mode="vector", k=1)
    with FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False) as fl:
        assert fl.settings.vector_store == "faiss"


LAZY = """
import json, sys, time
start = time.perf_counter()
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], show_progress=False)
def model_loaded():
    return any(m in sys.modules for m in ("onnxruntime", "sentence_transformers", "torch"))
after_open = model_loaded()
fl.list_documents(); fl.stats(); fl.count(); fl.search("refunds", search_mode="keyword")
after_reads = model_loaded()
[password] = [d.id for d in fl.list_documents() if d.page_content.startswith("Password")]
removed = fl.remove_document(password) == [password] and fl.count()["documents"] == 1
fl.gc()
after_remove = model_loaded()  # removing (and gc) embeds nothing: no model either
fl.search("refunds")
after_vector = "onnxruntime" in sys.modules
torch_free = "torch" not in sys.modules  # the default model runs from its ONNX export: no torch once exported
print(json.dumps([after_open, after_reads, removed, after_remove, after_vector, torch_free]))
"""


def test_the_model_loads_only_when_something_is_embedded(tmp_path: Path) -> None:
    directory = tmp_path / "idx"
    with FinderLedge(directory, show_progress=False) as fl:
        fl.add_texts(["Refunds take five business days.", "Password links last thirty minutes."])
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(LAZY), str(directory)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, False, True, False, True, True]


def test_a_context_capped_below_its_first_citation_keeps_whole_lines(minilm) -> None:
    fl = FinderLedge(embedding=minilm, show_progress=False)
    fl.add_document(Document(page_content="Refunds take five business days.", metadata={"source": "faq.md"}))
    for cap in (10, 20, 40):
        context = fl.get_context("refunds", max_chars=cap)
        assert len(context) <= cap
        assert "(sourc" not in context or "(source: faq.md" in context  # never a cut citation
    fl.close()


def test_raw_text_is_removed_by_the_source_its_results_show(minilm) -> None:  # type: ignore[no-untyped-def]
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        fl.add_texts(["Refunds take five business days.", "Tea grows on hills."])
        hit = fl.search("refunds", k=1)[0]
        assert hit.source.startswith("text:")
        assert fl.remove_document(hit.source) == [hit.parent_id]
        assert [d.page_content for d in fl.list_documents()] == ["Tea grows on hills."]
        with pytest.raises(DocumentNotFoundError):
            fl.remove_document(hit.source)
