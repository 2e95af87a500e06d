"""``FinderLedge(database_url=...)``: the ledger and the vectors in PostgreSQL (pgvector), BM25 as a local replica.

Every test runs against a real PostgreSQL 16 + pgvector (``pgserver``), each in its own schema.  Separate
``FINDERLEDGE_CACHE_DIR`` folders (where a machine keeps its replicas) stand in for separate machines.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pg_server import fresh_schema

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError

ROOT = Path(__file__).resolve().parents[2]

DOCS = [
    Document(page_content="The cat sat on the warm windowsill all afternoon.", metadata={"user": "alice"}),
    Document(page_content="Quarterly revenue grew by twelve percent in Europe.", metadata={"user": "bob"}),
    Document(
        page_content="東京の桜は三月の終わりに満開になります。", metadata={"user": "alice", "lang": "ja"}
    ),
]


@pytest.fixture
def schema() -> str:
    return fresh_schema()


@pytest.fixture
def fl(pg_url: str, schema: str, minilm: Any, tmp_path: Path) -> Iterator[FinderLedge]:
    with FinderLedge(
        tmp_path / "replica",
        database_url=pg_url,
        database_schema=schema,
        embedding=minilm,
        show_progress=False,
    ) as ledger:
        yield ledger


def _contents(results: Any) -> list[str]:
    return [r.content for r in results]


def test_every_leg_searches_the_database(fl: FinderLedge) -> None:
    fl.add_document(DOCS)
    assert fl.vector_store.location == "ledger"
    assert fl.settings.vector_store == "pgvector"
    for mode, query in (
        ("vector", "a cat resting by a window"),
        ("keyword", "revenue Europe"),
        ("hybrid", "桜 満開"),
        ("keyword", "桜"),
    ):
        assert _contents(fl.search(query, search_mode=mode, k=1))[0] in {d.page_content for d in DOCS}, mode
    assert _contents(fl.search("a cat resting by a window", search_mode="vector", k=1)) == [
        DOCS[0].page_content
    ]
    assert _contents(fl.search("桜", search_mode="keyword", k=1)) == [DOCS[2].page_content]
    for mode in ("vector", "keyword", "hybrid"):
        found = fl.search("cat revenue 桜", search_mode=mode, k=10, filter={"user": "alice"})
        assert found and {r.metadata["user"] for r in found} == {"alice"}, mode
    stats = fl.stats()
    assert stats["documents"] == 3 if "documents" in stats else True


def test_removal_reaches_both_legs(fl: FinderLedge) -> None:
    ids = fl.add_document(DOCS)
    fl.delete([ids[0]])
    assert DOCS[0].page_content not in _contents(fl.search("cat windowsill", search_mode="vector", k=5))
    assert DOCS[0].page_content not in _contents(fl.search("cat windowsill", search_mode="keyword", k=5))
    assert len(fl.vector_store) == 2


def test_the_environment_variable_selects_postgres(
    pg_url: str, schema: str, minilm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FINDERLEDGE_DATABASE_URL", pg_url)
    monkeypatch.setenv("FINDERLEDGE_DATABASE_SCHEMA", schema)
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        fl.add_texts(["hello from the environment"])
        assert fl.persist_directory is None
        assert fl.ledger.name.endswith(schema) or schema in fl.ledger.name
    with FinderLedge(embedding=minilm, show_progress=False) as again:  # another process, same database
        assert _contents(again.search("hello", search_mode="keyword")) == ["hello from the environment"]


def test_the_cli_uses_the_database_named_by_the_environment(
    pg_url: str,
    schema: str,
    tmp_path: Path,
    minilm: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import finderledge.facade
    from finderledge.cli.commands import main

    real = finderledge.facade.FinderLedge
    monkeypatch.setattr(
        finderledge.facade, "FinderLedge", lambda *a, **kw: real(*a, **{**kw, "embedding": minilm})
    )
    monkeypatch.setenv("FINDERLEDGE_DATABASE_URL", pg_url)
    monkeypatch.setenv("FINDERLEDGE_DATABASE_SCHEMA", schema)
    (tmp_path / "notes.txt").write_text("The staff canteen opens at half past eleven.", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["add", "notes.txt", "--dir", "machine-a"]) == 0
    capsys.readouterr()
    assert (
        main(["search", "canteen opening time", "--dir", "machine-b", "--json"]) == 0
    )  # another machine's replica
    assert "half past eleven" in capsys.readouterr().out
    assert not (tmp_path / "machine-b" / "ledger.sqlite3").exists()


def test_other_vector_stores_are_refused_in_postgres_mode(pg_url: str, schema: str, minilm: Any) -> None:
    with pytest.raises(ConfigurationError, match="vector leg is pgvector in the same database"):
        FinderLedge(database_url=pg_url, database_schema=schema, vector_store="faiss", embedding=minilm)


def test_no_password_in_files_logs_or_errors(
    pg_url: str, schema: str, minilm: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            "DO $$BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'fl_user') THEN "
            "CREATE ROLE fl_user LOGIN SUPERUSER PASSWORD 'Sup3rS3cret'; END IF; END$$"
        )
    url = pg_url.replace("postgres:@", "fl_user:Sup3rS3cret@")
    cache = tmp_path / "cache"
    with caplog.at_level(logging.DEBUG):
        with FinderLedge(
            cache / "replica", database_url=url, database_schema=schema, embedding=minilm, show_progress=True
        ) as fl:
            fl.add_document(DOCS)
            fl.search("cat")
            dumped = json.dumps(fl.stats(), default=str)
        with pytest.raises(ConfigurationError) as refused:
            FinderLedge(
                database_url=url.replace("/postgres?", "/no_such_db?"),
                database_schema=schema,
                embedding=minilm,
            )
    assert "Sup3rS3cret" not in dumped
    assert "Sup3rS3cret" not in caplog.text
    assert "Sup3rS3cret" not in str(refused.value) and "no_such_db" in str(refused.value)
    for path in cache.rglob("*"):
        if path.is_file():
            assert b"Sup3rS3cret" not in path.read_bytes(), path
    with psycopg.connect(pg_url) as conn:  # nor in the database's recorded settings
        rows = conn.execute(f"SELECT value FROM {schema}.info").fetchall()
    assert not any("Sup3rS3cret" in str(r[0]) for r in rows)


def test_a_replica_catches_up_and_a_recreated_database_is_rebuilt(
    pg_url: str, schema: str, minilm: Any, tmp_path: Path
) -> None:
    import psycopg

    kw = {"database_url": pg_url, "database_schema": schema, "embedding": minilm, "show_progress": False}
    with FinderLedge(tmp_path / "a", **kw) as machine_a:
        machine_a.add_document(DOCS[:2])
    with FinderLedge(tmp_path / "b", **kw) as machine_b:
        machine_b.add_texts([f"note number {i} about zebras" for i in range(5)])
    seen: dict[str, Any] = {}
    with FinderLedge(tmp_path / "a", **kw) as again:  # replays the 5 new changes from its checkpoint
        seen = json.loads((tmp_path / "a" / "replica.json").read_text())
        assert len(again.search("zebras", search_mode="keyword", k=10)) == 5
    assert (
        json.loads(seen["index:keyword"])["seq"] == 2
    )  # opened from its own checkpoint (2 changes), replayed 5
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    with FinderLedge(tmp_path / "a", **kw) as fresh:  # same folder, new database: its old replica is not used
        assert fresh.search("zebras", search_mode="keyword") == []
        fresh.add_texts(["a lone giraffe"])
        assert _contents(fresh.search("giraffe", search_mode="keyword")) == ["a lone giraffe"]


# -- two processes standing for two machines ----------------------------------------------------------------
WORKER = textwrap.dedent("""
    import sys, json
    from finderledge import EmbeddingModelFactory, FinderLedge
    url, schema, action, arg = sys.argv[1:5]
    with FinderLedge(database_url=url, database_schema=schema, show_progress=False) as fl:
        if action == "add":
            print(json.dumps(fl.add_texts(json.loads(arg))))
        else:
            print(json.dumps(fl.delete(json.loads(arg))))
""")


def _other_machine(tmp_path: Path, name: str, *args: str) -> list[str]:
    env = {**os.environ, "FINDERLEDGE_CACHE_DIR": str(tmp_path / f"machine-{name}"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


@pytest.mark.slow
def test_another_machine_writes_and_this_one_sees_it_in_both_legs(
    pg_url: str, schema: str, tmp_path: Path
) -> None:
    with FinderLedge(
        tmp_path / "here", database_url=pg_url, database_schema=schema, show_progress=False
    ) as here:
        here.add_texts(["an unrelated note about gardening"])
        assert here.search("penguins", search_mode="keyword") == []
        ids = _other_machine(
            tmp_path,
            "b",
            pg_url,
            schema,
            "add",
            json.dumps(["Emperor penguins huddle together through the Antarctic winter."]),
        )
        for mode in ("keyword", "vector", "hybrid"):
            assert _contents(here.search("penguins in Antarctica", search_mode=mode, k=1))[0].startswith(
                "Emperor"
            ), mode
        _other_machine(tmp_path, "b", pg_url, schema, "delete", json.dumps(ids))
        for mode in ("keyword", "vector", "hybrid"):
            assert not any(
                c.startswith("Emperor") for c in _contents(here.search("penguins", search_mode=mode))
            ), mode


@pytest.mark.slow
def test_two_machines_writing_at_once_lose_nothing(
    pg_url: str, schema: str, tmp_path: Path, minilm: Any
) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    procs = []
    for name in ("b", "c"):
        texts = [f"machine {name} document {i} with a unique word {name}word{i}" for i in range(15)]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", WORKER, pg_url, schema, "add", json.dumps(texts)],
                env={**env, "FINDERLEDGE_CACHE_DIR": str(tmp_path / f"machine-{name}")},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
    with FinderLedge(
        tmp_path / "here", database_url=pg_url, database_schema=schema, embedding=minilm, show_progress=False
    ) as here:
        assert len(here.list_documents()) == 30
        changes = here.ledger.changes_since(0)
        assert [c.seq for c in changes] == sorted({c.seq for c in changes}) and len(changes) == 30
        for name in ("b", "c"):
            for i in (0, 14):
                assert len(here.search(f"{name}word{i}", search_mode="keyword", k=1)) == 1
        assert len(here.vector_store) == 30


def test_a_document_id_owns_only_its_copy_in_postgres(fl: FinderLedge, tmp_path: Path) -> None:
    """Issue 31: folder ingest, the same file under doc-42, remove doc-42: the folder's copy stays (and the
    mirror image: removing the path leaves doc-42's copy)."""
    folder = tmp_path / "mydocs"
    folder.mkdir()
    handbook = folder / "handbook.txt"
    handbook.write_text("Refunds are paid within thirty days.", encoding="utf-8")
    fl.add_document(folder)
    fl.add_document(handbook, document_id="doc-42")
    assert fl.count(filter={"source": str(handbook)})["documents"] == 2
    fl.remove_document("doc-42")
    assert fl.count(filter={"source": str(handbook)})["documents"] == 1
    assert _contents(fl.search("refunds", k=3)) == ["Refunds are paid within thirty days."]
    fl.add_document(handbook, document_id="doc-42")
    fl.remove_document(str(handbook))
    assert [d.metadata["document_id"] for d in fl.list_documents(filter={"source": str(handbook)})] == [
        "doc-42"
    ]
