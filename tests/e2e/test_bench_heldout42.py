"""Issue 42's held-out-style sets (benchmarks/build_heldout42.py): each is built from the shared SciFact files at
run time with the shape its docstring promises (nothing embedded here: the sets' figures are the benchmark's)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from paths import dataset

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import build_heldout42 as build


def _read(path: Path) -> dict[str, dict[str, str]]:
    return {d["_id"]: d for d in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def _qrels(folder: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        qid, did, _ = line.split("\t")
        out.setdefault(qid, set()).add(did)
    return out


@pytest.fixture(scope="module")
def sets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dataset("scifact")  # skips with the dataset's name, or fails in CI, when it is not beside the clone
    out = tmp_path_factory.mktemp("heldout42")
    assert build.main(["--out", str(out)]) == 0
    return out


def test_every_set_is_a_beir_folder_whose_qrels_name_its_documents(sets: Path) -> None:
    names = ("entity", "entity-names", "entity-strict", "rare-terms", "long", "keyword-edge", "scifact-sub")
    for name in names:
        corpus, queries, qrels = (
            _read(sets / name / "corpus.jsonl"),
            _read(sets / name / "queries.jsonl"),
            _qrels(sets / name),
        )
        assert qrels and set(qrels) <= set(queries), name
        assert all(docs <= set(corpus) for docs in qrels.values()), name
        assert len(corpus) <= 3000 and len(queries) <= 300, name  # embeds in minutes on a shared machine


def test_entity_strict_documents_never_name_their_query_and_entity_titles_are_gone(sets: Path) -> None:
    corpus = _read(sets / "entity-strict" / "corpus.jsonl")
    queries = _read(sets / "entity-strict" / "queries.jsonl")
    for qid, docs in _qrels(sets / "entity-strict").items():
        (did,) = docs
        body = corpus[did]["text"].lower()
        assert corpus[did]["title"] == ""
        for word in build.content_words(queries[qid]["text"]):
            assert not any(w.startswith(word[: build.STEM_CHARS]) for w in build.content_words(body)), (
                qid,
                word,
            )
    # the shared corpus of entity / entity-names / rare-terms: one index serves the three query sets
    same = {(sets / n / "corpus.jsonl").read_bytes() for n in ("entity", "entity-names", "rare-terms")}
    assert len(same) == 1


def test_long_documents_are_thousands_of_words_and_judged_at_document_level(sets: Path) -> None:
    corpus = _read(sets / "long" / "corpus.jsonl")
    words = [len(d["text"].split()) for d in corpus.values()]
    assert min(words) >= 2000 and sum(words) / len(words) >= 3000
    assert all(did.startswith("long") for docs in _qrels(sets / "long").values() for did in docs)


def test_a_rebuild_is_byte_identical(sets: Path, tmp_path: Path) -> None:
    assert build.main(["--out", str(tmp_path), "entity", "long"]) == 0
    for name in ("entity", "entity-strict", "long"):
        for part in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
            assert (tmp_path / name / part).read_bytes() == (sets / name / part).read_bytes(), (name, part)
