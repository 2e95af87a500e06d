from __future__ import annotations

from pathlib import Path

import pytest

from finderledge import FinderLedge, Settings


def test_defaults() -> None:
    s = Settings.resolve({}, environ={}, env_file=None)
    assert (s.vector_store, s.search_mode, s.k, s.fusion, s.rrf_k) == ("faiss", "hybrid", 10, "adaptive", 60)
    assert (s.vector_weight, s.keyword_weight) == (None, None)  # adaptive fusion sets them
    assert s.persist_directory is None


def test_precedence_arguments_env_dotenv_defaults(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("FINDERLEDGE_K=7\nFINDERLEDGE_CHUNK_SIZE=500\nFINDERLEDGE_SEARCH_MODE=keyword\n")
    environ = {"FINDERLEDGE_K": "5", "FINDERLEDGE_CHUNK_SIZE": "600"}
    s = Settings.resolve({"k": 3}, environ=environ, env_file=env_file)
    assert s.k == 3  # argument beats environment and .env
    assert s.chunk_size == 600  # environment beats .env
    assert s.search_mode == "keyword"  # .env beats default
    assert s.chunk_overlap == 100  # default
    assert Settings.resolve({}, environ={}, env_file=env_file, defaults={"k": 9, "rrf_k": 20}).rrf_k == 20
    assert (
        Settings.resolve({}, environ={}, env_file=env_file, defaults={"k": 9}).k == 7
    )  # .env beats recorded


@pytest.mark.parametrize(
    ("key", "value", "setting"),
    [
        ("FINDERLEDGE_CHUNK_SIZE", "big", "chunk_size"),
        ("FINDERLEDGE_VECTOR_STORE", "pinecone", "vector_store"),
        ("FINDERLEDGE_SEARCH_MODE", "fuzzy", "search_mode"),
        ("FINDERLEDGE_K", "0", "k"),
        ("FINDERLEDGE_VECTOR_WEIGHT", "heavy", "vector_weight"),
        ("FINDERLEDGE_SHOW_PROGRESS", "maybe", "show_progress"),
    ],
)
def test_bad_environment_value_names_the_setting(key: str, value: str, setting: str) -> None:
    with pytest.raises(ValueError, match=setting):
        Settings.resolve({}, environ={key: value}, env_file=None)


def test_bad_arguments_raise_value_error_naming_setting() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        Settings.resolve({"chunk_size": "ten"}, environ={}, env_file=None)
    with pytest.raises(ValueError, match="chunk_overlap"):
        Settings.resolve({"chunk_size": 100, "chunk_overlap": 100}, environ={}, env_file=None)
    with pytest.raises(ValueError, match="vector_store"):
        FinderLedge(vector_store="milvus")
    with pytest.raises(ValueError, match="search_mode"):
        FinderLedge(search_mode="semantic")


def test_facade_reads_environment_and_dotenv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm) -> None:
    (tmp_path / ".env").write_text(f"FINDERLEDGE_PERSIST_DIRECTORY={tmp_path / 'idx'}\nFINDERLEDGE_K=4\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FINDERLEDGE_VECTOR_STORE", "faiss")
    fl = FinderLedge(embedding=minilm)
    try:
        assert fl.settings.vector_store == "faiss"
        assert fl.settings.k == 4
        assert fl.persist_directory == tmp_path / "idx"
        assert (tmp_path / "idx" / "ledger.sqlite3").exists()
    finally:
        fl.close()
    monkeypatch.setenv("FINDERLEDGE_CHUNK_SIZE", "lots")
    with pytest.raises(ValueError, match="chunk_size.*FINDERLEDGE_CHUNK_SIZE"):
        FinderLedge(embedding=minilm)


def test_script_check_settings(minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(embedding=minilm, vector_scripts="latin,kana", min_vector_share=0.3)
    assert fl.finder.vector_scripts == frozenset({"latin", "kana"}) and fl.finder.min_vector_share == 0.3
    assert FinderLedge(embedding=minilm).finder.vector_scripts == frozenset({"latin"})  # MiniLM: English only
    with pytest.raises(ValueError, match="vector_scripts"):
        FinderLedge(embedding=minilm, vector_scripts="latn")
    with pytest.raises(ValueError, match="min_vector_share"):
        Settings.resolve({"min_vector_share": 2.0}, environ={}, env_file=None)


def test_bm25_settings_reach_the_keyword_leg(minilm) -> None:  # type: ignore[no-untyped-def]
    texts = ["the cat sat on the mat", "a cat and a dog and a bird and a fish in a long sentence"]
    scores = {}
    for k1, b in ((0.9, 0.4), (1.5, 0.75)):
        fl = FinderLedge(embedding=minilm, bm25_k1=k1, bm25_b=b, search_mode="keyword", env_file=None)
        assert (fl.keyword_store.k1, fl.keyword_store.b) == (k1, b)
        fl.add_texts(texts)
        scores[k1] = [r.score for r in fl.search("cat")]
        fl.close()
    assert scores[0.9] != scores[1.5]  # the parameters change the keyword scores
    fl = FinderLedge(embedding=minilm, env_file=None)
    assert (fl.keyword_store.k1, fl.keyword_store.b) == (0.9, 0.4)  # the defaults: Anserini's
    fl.close()
    assert Settings.resolve({}, environ={"FINDERLEDGE_BM25_B": "0.75"}, env_file=None).bm25_b == 0.75
    with pytest.raises(ValueError, match="bm25_b"):
        Settings.resolve({"bm25_b": 1.5}, environ={}, env_file=None)
    with pytest.raises(ValueError, match="bm25_k1"):
        Settings.resolve({"bm25_k1": -1}, environ={}, env_file=None)
