"""Contextual chunk prefixes (issue 42): with ``chunk_context`` each chunk is embedded and BM25-indexed with its
parent's title and Markdown heading path above it, while the text a result, a context or a citation shows is the
chunk's own.  The setting is recorded with the directory; switching it is refused on opening and done by reindex.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings

from finderledge import FinderLedge, Settings
from finderledge.errors import ConfigurationError
from finderledge.ingest.splitter import DocumentSplitter, chunk_context
from finderledge.metadata import FL_KEY, embedded_text

TITLE = "Quokka habitat survey"
# the title's words appear nowhere in the body: a chunk can only match them through its context
BODY = "\n\n".join(
    [
        "Rottnest island animals were counted at dawn across the western shrubland plots. " * 2,
        "Burrow density rose where predators were absent from the plots for several seasons. " * 2,
    ]
)
MARKDOWN = (
    "# Field manual\n\nGeneral notes on equipment and safety for every visit.\n\n"
    "## Trapping\n\nIntroductory words about trapping days.\n\n"
    "### Bait mixtures\n\n" + "Peanut butter and oats are mixed with apple pieces before dawn. " * 4
)


class RecordingEmbeddings(Embeddings):
    """The unit layer's fake model, keeping every passage it is asked to embed."""

    def __init__(self) -> None:
        self.inner = DeterministicFakeEmbedding(size=16)
        self.passages: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.passages.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _open(path: Path | None, model: Embeddings, **settings: Any) -> FinderLedge:
    return FinderLedge(
        path, embedding=model, chunk_size=120, chunk_overlap=0, show_progress=False, env_file=None, **settings
    )


def _survey() -> Document:
    return Document(page_content=f"{TITLE}\n\n{BODY}", metadata={"title": TITLE, "beir_id": "s1"})


def test_the_title_reaches_the_embedding_and_bm25_but_not_the_results(tmp_path: Path) -> None:
    model = RecordingEmbeddings()
    fl = _open(tmp_path / "idx", model, chunk_context=True)
    fl.add_documents([_survey()])
    body_chunks = [p for p in model.passages if "Burrow density" in p]
    assert body_chunks and all(p.startswith(f"{TITLE}\n\n") for p in body_chunks)  # the model read the title
    assert sum(p.count(TITLE) for p in model.passages) == len(model.passages)  # never twice (chunk 0 has it)
    # BM25 matches the title's words in a chunk whose own text lacks them
    hits = fl.search("quokka habitat", search_mode="keyword", k=10)
    burrow = [h for h in hits if "Burrow density" in h.content]
    assert burrow, "the keyword leg did not index the context"
    for hit in fl.search("quokka habitat burrow", k=10):
        assert hit.content == hit.document.page_content
        assert (
            TITLE not in hit.content or hit.info["split_index"] == 0
        )  # only the chunk that holds it says it
    burrow_hit = burrow[0]
    assert burrow_hit.info["context"] == TITLE  # the context is visible as FinderLedge's metadata
    assert not burrow_hit.content.startswith(TITLE)
    # citations and contexts quote the chunk's own text
    answer = fl.answer("quokka habitat burrow", k=5)
    assert answer.sources and all(
        not s.passage.startswith(TITLE) or "Burrow" not in s.passage for s in answer.sources
    )
    assert any(s.passage == burrow_hit.content for s in answer.sources)
    fl.close()


def test_without_chunk_context_nothing_is_added(tmp_path: Path) -> None:
    model = RecordingEmbeddings()
    fl = _open(None, model)
    assert fl.settings.chunk_context is False
    fl.add_documents([_survey()])
    assert all(not p.startswith(f"{TITLE}\n\n") for p in model.passages if "Burrow density" in p)
    hits = fl.search("quokka habitat", search_mode="keyword", k=10)
    assert all("Burrow density" not in h.content for h in hits)
    fl.close()


def test_markdown_chunks_carry_their_heading_path() -> None:
    splitter = DocumentSplitter(chunk_size=150, chunk_overlap=0, chunk_context=True)
    _, parts = splitter.split_parts(
        MARKDOWN, {"file_name": "manual.md"}, "p", lambda p, i: f"{p}-{i}", doc_type="markdown"
    )
    contexts = {text: md[FL_KEY].get("context") for text, md in parts}
    bait = [t for t in contexts if t.startswith("Peanut butter")]
    assert bait and all(contexts[t] == "manual.md > Field manual > Trapping > Bait mixtures" for t in bait)
    own = [t for t in contexts if t.startswith("### Bait mixtures")]
    assert all(contexts[t] == "manual.md > Field manual > Trapping" for t in own)  # its own heading not twice
    assert all(not t.startswith("manual.md") for t in contexts)  # the chunk texts themselves are unchanged
    for text, md in parts:
        assert embedded_text(text, md) == (
            f"{md[FL_KEY]['context']}\n\n{text}" if "context" in md[FL_KEY] else text
        )


@pytest.mark.parametrize(
    ("title", "section", "chunk", "expected"),
    [
        ("Guide", None, "Some text", "Guide"),
        ("Guide", "Guide > Install", "Run it", "Guide > Install"),  # a first heading equal to the title: once
        ("Guide", "Intro > Install", "## Install\n\nRun it", "Guide > Intro"),
        ("Guide", None, "Guide\n\nbody", None),  # a chunk that starts with its title
        (None, None, "text", None),
    ],
)
def test_chunk_context_parts(
    title: str | None, section: str | None, chunk: str, expected: str | None
) -> None:
    assert chunk_context(title, section, chunk) == expected


def test_the_setting_is_validated_and_read_from_the_environment() -> None:
    with pytest.raises(ConfigurationError, match="chunk_context"):
        Settings(chunk_context="yes")  # type: ignore[arg-type]
    assert Settings.resolve(environ={"FINDERLEDGE_CHUNK_CONTEXT": "on"}, env_file=None).chunk_context is True
    with pytest.raises(ConfigurationError, match=r"chunk_context.*FINDERLEDGE_CHUNK_CONTEXT.*boolean"):
        Settings.resolve(environ={"FINDERLEDGE_CHUNK_CONTEXT": "maybe"}, env_file=None)


def test_recorded_kept_refused_when_switched_and_switched_by_reindex(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    fl = _open(path, RecordingEmbeddings(), chunk_context=True)
    fl.add_documents([_survey()])
    fl.close()
    model = RecordingEmbeddings()
    fl = _open(path, model)  # reopened without the argument: keeps what it was built with
    assert fl.settings.chunk_context is True
    fl.add_documents(
        [
            Document(
                page_content="Wallaby notes\n\n" + BODY.replace("Burrow", "Nest"),
                metadata={"title": "Wallaby notes"},
            )
        ]
    )
    assert any(p.startswith("Wallaby notes\n\nNest") for p in model.passages)
    fl.close()
    with pytest.raises(ConfigurationError, match=r"chunk_context.*reindex\(chunk_context=False\)"):
        _open(path, RecordingEmbeddings(), chunk_context=False)
    model = RecordingEmbeddings()
    fl = _open(path, model)
    report = fl.reindex(chunk_context=False)
    assert report.embeddings_computed > 0  # every contextual chunk embedded again, without its title
    assert all(not p.startswith(f"{TITLE}\n\nBurrow") for p in model.passages)
    assert not fl.check().problems
    fl.close()
    fl = _open(path, RecordingEmbeddings())
    assert fl.settings.chunk_context is False
    assert json.loads(fl.engine.ledger.get_info("settings") or "{}")["chunk_context"] is False
    assert all("context" not in h.info for h in fl.search("burrow", k=10))
    fl.close()


def test_a_vector_cached_with_context_is_not_reused_without_it(tmp_path: Path) -> None:
    """The stored chunk's text hash is the hash of the text its vector embeds: a plain chunk of the same text
    gets a vector of its own text, never the contextual one."""
    model = RecordingEmbeddings()
    fl = _open(tmp_path / "idx", model, chunk_context=True)
    fl.add_documents([_survey()])
    assert not fl.check().problems  # the integrity check hashes what was embedded
    contextual = {p.partition("\n\n")[2] for p in model.passages if p.startswith(f"{TITLE}\n\n")}
    assert contextual
    model.passages.clear()
    fl.add_documents(
        [Document(page_content=BODY, metadata={"beir_id": "untitled"})]
    )  # the same text, no title
    assert contextual <= set(model.passages)  # embedded as themselves, not taken from the titled chunks
    assert not fl.check().problems
    fl.close()


def test_an_empty_directory_may_switch_and_a_legacy_one_reads_as_off(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    _open(path, RecordingEmbeddings()).close()  # created empty, chunk_context off
    fl = _open(path, RecordingEmbeddings(), chunk_context=True)  # nothing embedded yet: allowed, recorded
    fl.close()
    fl = _open(path, RecordingEmbeddings())
    assert fl.settings.chunk_context is True
    recorded = json.loads(fl.engine.ledger.get_info("settings") or "{}")
    recorded.pop("chunk_context")  # as a directory built before the setting existed
    fl.engine.ledger.set_info("settings", json.dumps(recorded))
    fl.close()
    fl = _open(path, RecordingEmbeddings())
    assert fl.settings.chunk_context is False
    fl.close()


def test_after_a_switch_the_same_process_writes_and_rebuilds_with_the_new_setting(tmp_path: Path) -> None:
    """``reindex(chunk_context=True)`` then, in the same process: a new document is embedded with its context,
    and a rebuild of the vector index from the ledger (``check(repair=True)``) keeps the switched vectors."""
    path = tmp_path / "idx"
    with _open(path, RecordingEmbeddings()) as fl:
        fl.add_documents([_survey()])
    model = RecordingEmbeddings()
    with _open(path, model) as fl:
        fl.reindex(chunk_context=True)
        model.passages.clear()
        fl.add_documents(
            [Document(page_content=f"Wallaby notes\n\n{BODY}", metadata={"title": "Wallaby notes"})]
        )
        assert any(p.startswith("Wallaby notes\n\nRottnest") for p in model.passages)
        target = min((path / "faiss" / "segments").glob("seg-*/vectors.npy"))
        raw = bytearray(target.read_bytes())
        raw[-1] ^= 0x40
        target.write_bytes(bytes(raw))
        assert any("vector index" in r for r in fl.check(repair=True).repaired)
        assert fl.check().clean
        assert fl.settings.chunk_context is True
        assert [h.id for h in fl.search("quokka habitat survey", k=1, search_mode="keyword")]


def test_an_instance_opened_before_a_switch_splits_with_the_switched_setting(tmp_path: Path) -> None:
    """A opens; B (another instance on the same directory) switches chunk_context on; a document A adds then
    is embedded with its context, as the directory's recorded setting says."""
    path = tmp_path / "idx"
    with _open(path, RecordingEmbeddings()) as fl:
        fl.add_documents([_survey()])
    model = RecordingEmbeddings()
    a = _open(path, model)
    a.add_documents([Document(page_content=BODY, metadata={"beir_id": "plain"})])  # its splitter made: off
    with _open(path, RecordingEmbeddings()) as b:
        b.reindex(chunk_context=True)
    model.passages.clear()
    a.add_documents([Document(page_content=f"Wallaby notes\n\n{BODY}", metadata={"title": "Wallaby notes"})])
    assert a.settings.chunk_context is True
    assert any(p.startswith("Wallaby notes\n\nRottnest") for p in model.passages)
    assert not a.check().problems
    a.close()
