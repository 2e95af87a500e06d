"""Every setting is checked in one place (config.Settings): a bad value raises ConfigurationError (a ValueError)
naming the setting, what was expected and, for the environment, a .env file or a reopened directory, where it
came from."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, Settings
from finderledge.config import CHUNK_UNITS, FUSIONS, SEARCH_MODES, VECTOR_STORES
from finderledge.errors import ConfigurationError

NAN, INF = float("nan"), float("inf")


def _open(**settings: Any) -> FinderLedge:
    return FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=None, **settings)


BAD_ARGUMENTS = [
    ("chunk_size", 0),
    ("chunk_size", -1),
    ("chunk_size", True),
    ("chunk_size", 2.5),
    ("chunk_size", "ten"),
    ("chunk_size", NAN),
    ("chunk_size", INF),
    ("chunk_overlap", -1),
    ("chunk_overlap", 1000),
    ("chunk_overlap", 5000),
    ("chunk_overlap", True),
    ("k", 0),
    ("k", -3),
    ("k", True),
    ("k", False),
    ("k", np.True_),
    ("k", 2.5),
    ("k", NAN),
    ("k", "many"),
    ("candidate_k", 0),
    ("candidate_k", True),
    ("candidate_k", INF),
    ("rrf_k", 0),
    ("rrf_k", -60),
    ("rrf_k", True),
    ("embedding_batch_size", 0),
    ("embedding_batch_size", True),
    ("embedding_batch_size", INF),
    ("vector_weight", NAN),
    ("vector_weight", INF),
    ("vector_weight", -INF),
    ("vector_weight", -0.5),
    ("vector_weight", True),
    ("vector_weight", "heavy"),
    ("vector_weight", [1.0]),
    ("keyword_weight", NAN),
    ("keyword_weight", INF),
    ("keyword_weight", -1),
    ("keyword_weight", False),
    ("bm25_k1", INF),
    ("bm25_k1", NAN),
    ("bm25_k1", -0.1),
    ("bm25_k1", True),
    ("bm25_b", -0.1),
    ("bm25_b", 1.5),
    ("bm25_b", NAN),
    ("bm25_b", INF),
    ("bm25_b", True),
    ("min_vector_share", -0.1),
    ("min_vector_share", 1.01),
    ("min_vector_share", NAN),
    ("min_vector_share", True),
    ("lock_timeout", NAN),
    ("lock_timeout", INF),
    ("lock_timeout", True),
    ("lock_timeout", "soon"),
    ("search_mode", "semantic"),
    ("search_mode", ""),
    ("search_mode", 5),
    ("fusion", "rff"),
    ("fusion", ""),
    ("vector_store", "milvus"),
    ("vector_store", ""),
    ("chunk_unit", "tokens"),
    ("vector_scripts", "latn"),
    ("vector_scripts", "latin,klingon"),
    ("vector_scripts", 5),
    ("show_progress", "maybe"),
    ("show_progress", 2),
    ("show_progress", 0.5),
]


@pytest.mark.parametrize(("setting", "bad"), BAD_ARGUMENTS, ids=[f"{s}={v!r}" for s, v in BAD_ARGUMENTS])
def test_bad_argument_is_refused_naming_the_setting(setting: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=rf"'{setting}'.*expected") as info:
        _open(**{setting: bad})
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("setting", "allowed"),
    [
        ("search_mode", SEARCH_MODES),
        ("fusion", FUSIONS),
        ("vector_store", VECTOR_STORES),
        ("chunk_unit", CHUNK_UNITS),
    ],
)
def test_bad_choice_lists_the_allowed_values(setting: str, allowed: tuple[str, ...]) -> None:
    with pytest.raises(ConfigurationError) as info:
        _open(**{setting: "nonsense"})
    assert all(repr(value) in str(info.value) for value in allowed)


def test_bad_vector_scripts_lists_the_known_scripts() -> None:
    with pytest.raises(ConfigurationError, match="'auto'.*'any'.*'latin'"):
        Settings.resolve({"vector_scripts": "latn"}, environ={}, env_file=None)


def test_both_weights_zero_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="vector_weight.*keyword_weight.*expected"):
        _open(vector_weight=0, keyword_weight=0.0)
    for weights in ({"vector_weight": 0}, {"keyword_weight": 0}):  # one leg switched off is fine
        _open(**weights).close()


def test_chunk_overlap_error_says_where_chunk_size_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINDERLEDGE_CHUNK_SIZE", "50")
    with pytest.raises(ConfigurationError, match="chunk_overlap.*FINDERLEDGE_CHUNK_SIZE"):
        _open()  # the default overlap (100) is not below the size the environment set


BAD_ENVIRONMENT = [
    ("FINDERLEDGE_VECTOR_WEIGHT", "nan"),
    ("FINDERLEDGE_VECTOR_WEIGHT", "-inf"),
    ("FINDERLEDGE_KEYWORD_WEIGHT", "-1"),
    ("FINDERLEDGE_BM25_K1", "inf"),
    ("FINDERLEDGE_BM25_B", "2"),
    ("FINDERLEDGE_MIN_VECTOR_SHARE", "-1"),
    ("FINDERLEDGE_LOCK_TIMEOUT", "nan"),
    ("FINDERLEDGE_K", "0"),
    ("FINDERLEDGE_K", "true"),
    ("FINDERLEDGE_K", "2.5"),
    ("FINDERLEDGE_CANDIDATE_K", "-5"),
    ("FINDERLEDGE_RRF_K", "0"),
    ("FINDERLEDGE_CHUNK_SIZE", "0"),
    ("FINDERLEDGE_CHUNK_OVERLAP", "5000"),
    ("FINDERLEDGE_EMBEDDING_BATCH_SIZE", "0"),
    ("FINDERLEDGE_VECTOR_SCRIPTS", "latn"),
    ("FINDERLEDGE_SHOW_PROGRESS", "maybe"),
    ("FINDERLEDGE_SEARCH_MODE", "fuzzy"),
    ("FINDERLEDGE_FUSION", "sum"),
    ("FINDERLEDGE_VECTOR_STORE", "pinecone"),
    ("FINDERLEDGE_CHUNK_UNIT", "tokens"),
]


@pytest.mark.parametrize(("key", "raw"), BAD_ENVIRONMENT, ids=[f"{k}={v}" for k, v in BAD_ENVIRONMENT])
def test_bad_environment_value_names_the_variable(
    key: str, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(key, raw)
    setting = key.removeprefix("FINDERLEDGE_").lower()
    with pytest.raises(ConfigurationError, match=rf"'{setting}'.*environment variable {key}.*expected"):
        _open()


def test_bad_dotenv_value_names_the_variable_and_file(tmp_path: Path) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("FINDERLEDGE_VECTOR_WEIGHT=nan\n")
    with pytest.raises(
        ConfigurationError, match=r"'vector_weight'.*FINDERLEDGE_VECTOR_WEIGHT.*\.env.*expected"
    ):
        FinderLedge(embedding=DeterministicFakeEmbedding(size=8), env_file=env_file)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("true", True),
        ("1", True),
        ("YES", True),
        (" on ", True),
        ("false", False),
        ("0", False),
        ("No", False),
        ("off", False),
        ("auto", None),
        ("none", None),
    ],
)
def test_boolean_environment_strings_are_parsed(raw: str, expected: bool | None) -> None:
    assert (
        Settings.resolve({}, environ={"FINDERLEDGE_SHOW_PROGRESS": raw}, env_file=None).show_progress
        is expected
    )


def test_blank_environment_value_means_unset() -> None:
    assert Settings.resolve({}, environ={"FINDERLEDGE_K": "  "}, env_file=None).k == 10


def test_good_values_at_the_edges_are_accepted() -> None:
    s = Settings.resolve(
        {
            "bm25_b": 0,
            "min_vector_share": 1,
            "vector_weight": np.float32(0.5),
            "keyword_weight": 0,
            "bm25_k1": 0,
            "lock_timeout": -1,
            "k": np.int64(3),
            "chunk_overlap": 0,
            "chunk_size": 1,
            "rrf_k": 1,
            "vector_scripts": "Latin, kana",
        },
        environ={},
        env_file=None,
    )
    assert (s.bm25_b, s.min_vector_share, s.vector_weight, s.k, s.lock_timeout) == (0.0, 1.0, 0.5, 3, -1.0)
    assert all(type(getattr(s, name)) is float for name in ("bm25_b", "vector_weight", "lock_timeout"))
    assert type(s.k) is int
    env = {"FINDERLEDGE_VECTOR_WEIGHT": " 0.25 ", "FINDERLEDGE_K": "7", "FINDERLEDGE_LOCK_TIMEOUT": "0"}
    s = Settings.resolve({}, environ=env, env_file=None)
    assert (s.vector_weight, s.k, s.lock_timeout) == (0.25, 7, 0.0)
    json.dumps(s.to_dict())


@pytest.mark.parametrize(
    ("setting", "bad"),
    [
        ("k", True),
        ("k", "5"),
        ("chunk_size", None),
        ("vector_weight", NAN),
        ("bm25_b", "0.5"),
        ("search_mode", None),
        ("show_progress", "yes"),
        ("vector_scripts", "latn"),
        ("persist_directory", 5),
    ],
)
def test_settings_built_directly_are_checked_too(setting: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=rf"'{setting}'.*expected"):
        Settings(**{setting: bad})


def test_settings_built_directly_check_pairs() -> None:
    with pytest.raises(ConfigurationError, match="chunk_overlap"):
        Settings(chunk_size=50)
    with pytest.raises(ConfigurationError, match="keyword_weight"):
        Settings(vector_weight=0.0, keyword_weight=0.0)


def test_empty_names_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="'persist_directory'.*expected"):
        Settings.resolve({"persist_directory": ""}, environ={}, env_file=None)
    with pytest.raises(ConfigurationError, match="'embedding_model'.*expected"):
        Settings.resolve({"embedding_model": " "}, environ={}, env_file=None)


@pytest.mark.parametrize(
    ("setting", "bad"),
    [
        ("chunk_size", -5),
        ("chunk_size", True),
        ("chunk_overlap", "lots"),
        ("chunk_overlap", 5000),
        ("vector_store", "milvus"),
        ("chunk_unit", "tokens"),
    ],
)
def test_recorded_settings_of_a_reopened_directory_are_checked(
    tmp_path: Path, setting: str, bad: Any
) -> None:
    directory = tmp_path / "idx"
    FinderLedge(directory, embedding=DeterministicFakeEmbedding(size=8), env_file=None).close()
    db = sqlite3.connect(directory / "ledger.sqlite3")
    with db:
        recorded = json.loads(db.execute("SELECT value FROM info WHERE key = 'settings'").fetchone()[0])
        db.execute(
            "UPDATE info SET value = ? WHERE key = 'settings'", (json.dumps({**recorded, setting: bad}),)
        )
    db.close()
    with pytest.raises(ConfigurationError, match=rf"'{setting}'.*recorded in .*idx.*expected"):
        FinderLedge(directory, embedding=DeterministicFakeEmbedding(size=8), env_file=None)


def test_nan_weight_never_reaches_the_scores() -> None:
    fl = _open(vector_weight=0.5)
    try:
        fl.add_texts(["the cat sat on the mat", "a dog in the fog"])
        assert all(math.isfinite(r.score) for r in fl.search("cat"))
    finally:
        fl.close()


@pytest.mark.parametrize("bad", [True, 0, -1, 2.5, "twenty"])
def test_rerank_candidates_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="rerank_candidates"):
        FinderLedge(embedding=DeterministicFakeEmbedding(size=8), rerank_candidates=bad, env_file=None)
