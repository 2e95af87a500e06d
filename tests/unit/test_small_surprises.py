"""Issue 31, item 6: the small surprises of a first hour, each as it was reported.

``reindex --vector-store faiss`` left ``chroma/`` behind and the next open warned "restoring N chunk(s)";
YAML front matter stayed in the chunk text; ``{chunk}`` counted from 0 where the default citation counts
from 1; ``list`` showed no total; ``stats`` printed a dict repr; a CSV row longer than its header passed
silently.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

import finderledge.facade
from finderledge import FinderLedge
from finderledge.cli.commands import main
from finderledge.document_loader import DocumentLoader

EMBEDDING = DeterministicFakeEmbedding(size=16)


def _open(path: Path, **kw) -> FinderLedge:
    return FinderLedge(path, embedding=EMBEDDING, show_progress=False, env_file=None, **kw)


def test_switching_the_vector_store_removes_the_old_folder_and_warns_nothing_next_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = tmp_path / "index"
    with _open(index, vector_store="chroma") as fl:
        fl.add_texts(["alpha beta", "gamma delta", "epsilon"])
    assert (index / "chroma").is_dir()
    with _open(index, vector_store="faiss") as fl:  # what `finderledge reindex --vector-store faiss` does
        assert fl.count()["chunks"] == 3
    assert not (index / "chroma").exists() and (index / "faiss").is_dir()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="finderledge"), _open(index) as fl:
        assert fl.settings.vector_store == "faiss"
        assert [r.content for r in fl.search("gamma delta", k=1, search_mode="vector")]
    assert not [r for r in caplog.records if "restoring" in r.getMessage()], caplog.text


def test_yaml_front_matter_becomes_metadata_not_text(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    page = tmp_path / "post.md"
    page.write_text(
        "---\ntitle: Refund policy\ntags: [billing, refunds]\ndate: 2024-05-01\nsource: elsewhere\n---\n\n"
        "# Refunds\n\nRefunds are paid within thirty days.\n",
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        [doc] = DocumentLoader().load(page).documents
    assert doc.page_content.startswith("# Refunds") and "title:" not in doc.page_content
    assert doc.metadata["title"] == "Refund policy" and doc.metadata["tags"] == ["billing", "refunds"]
    assert doc.metadata["date"] == "2024-05-01"  # a YAML date, stored as metadata can hold it
    assert doc.metadata["source"] == str(page)  # the loader's own key wins, with a warning
    assert "front matter keys source" in caplog.text
    with _open(None) as fl:
        fl.add_document(page)
        [hit] = fl.search("refunds", k=1, filter={"tags": {"$contains": "billing"}})
        assert "---" not in hit.content and "title" not in hit.content


def test_a_thematic_break_or_bad_yaml_is_not_front_matter(tmp_path: Path) -> None:
    page = tmp_path / "notes.md"
    page.write_text("---\n: : not yaml [\n---\nBody text.\n", encoding="utf-8")
    [doc] = DocumentLoader().load(page).documents
    assert doc.page_content.startswith("---")
    plain = tmp_path / "plain.md"
    plain.write_text("Intro\n\n---\n\nMore.\n", encoding="utf-8")
    assert DocumentLoader().load(plain).documents[0].page_content == "Intro\n\n---\n\nMore.\n"


def test_chunk_in_a_custom_citation_counts_from_one_like_the_default() -> None:
    with _open(None) as fl:
        fl.add_texts(["A password reset link is valid for 30 minutes."], metadatas=[{"source": "reset.txt"}])
        results = fl.search("reset link", k=1)
        default = fl.get_context(results=results)
        custom = fl.get_context(results=results, citation="{source} chunk {chunk}/{chunks}")
    assert "chunk 1/1" in default and "reset.txt chunk 1/1" in custom
    assert "#0" in fl.get_context(results=results, citation="#{chunk_index}")


def test_a_csv_row_longer_than_its_header_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tmp_path / "plans.csv"
    table.write_text("name,price\nbasic,10\npro,20,extra value\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        docs = DocumentLoader().load(table).documents
    assert len(docs) == 2 and "column_3: extra value" in docs[1].page_content
    [warning] = [r.getMessage() for r in caplog.records if "header" in r.getMessage()]
    assert str(table) in warning and "row 2" in warning and "3 fields" in warning


@pytest.fixture
def cli_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An index the CLI opens with the fake embedding."""
    real = finderledge.facade.FinderLedge
    monkeypatch.setattr(
        finderledge.facade, "FinderLedge", lambda *a, **kw: real(*a, **{**kw, "embedding": EMBEDDING})
    )
    index = tmp_path / "index"
    with _open(index) as fl:
        fl.add_texts([f"note number {i}" for i in range(5)], metadatas=[{"n": i} for i in range(5)])
    return str(index)


def test_list_shows_a_total(cli_index: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "-d", cli_index, "--limit", "2", "--offset", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and out[-1] == "2 of 5 documents (5 chunks), from #2"
    assert main(["list", "-d", cli_index, "--filter", '{"n": {"$gte": 3}}']) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "2 of 2 documents (2 chunks)"
    assert main(["list", "-d", cli_index, "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 5  # --json keeps its shape: the list


def test_stats_prints_readable_lines(cli_index: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stats", "-d", cli_index]) == 0
    out = capsys.readouterr().out
    assert "documents: 5, chunks: 5" in out and "embedding cache: 0 vectors (0.0 MB" in out
    assert "{" not in out and "settings: vector_store " in out
    assert main(["stats", "-d", cli_index, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["embedding_cache"]["entries"] == 0
