"""Bulk COPY rows formatted by psycopg's C code (issue 43, bulk50): the bytes sent are those of the per-value
encoders of :mod:`finderledge.ledgers.bulk` (byte for byte), the rows stored the same, and a value psycopg's
dumper refuses (an int in a text column, an int in a float8 one) is converted as before.  A real PostgreSQL 16
+ pgvector (``pgserver``)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import psycopg
import pytest
from pg_server import fresh_schema

from finderledge.ledgers import bulk

TYPES = {
    "id": "text",
    "n": "int4",
    "big": "int8",
    "at": "float8",
    "flag": "bool",
    "md": "jsonb",
    "vec": "vector",
    "note": "text",
}


@pytest.fixture(autouse=True)
def _needs_pgserver() -> None:
    pytest.importorskip("pgserver")


def _rows() -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(5)
    odd = ["tab\there", "new\nline", "back\\slash", "東京の桜", "quote\"'", "é" * 300, "", "emoji 🎉"]
    rows: list[tuple[Any, ...]] = []
    for i in range(150):
        rows.append(
            (
                f"r{i:04d}",
                i - 75,
                2**40 + i,
                i / 7 if i % 5 else i,  # an int in a float8 column: psycopg refuses it, converted here
                i % 2 == 0,
                json.dumps({"n": i, "tag": odd[i % len(odd)]}, ensure_ascii=False),
                rng.standard_normal(4).astype(np.float32) if i % 3 else rng.standard_normal(4).tolist(),
                None if i % 4 == 0 else (i if i % 11 == 0 else odd[i % len(odd)]),  # an int in a text column
            )
        )
    return rows


def _copy(
    conn: psycopg.Connection[Any], schema: str, table: str, monkeypatch: pytest.MonkeyPatch, c_module: bool
) -> bytes:
    sent: list[bytes] = []
    real = psycopg.Copy.write

    def write(self: Any, buffer: Any) -> None:
        sent.append(bytes(buffer))
        real(self, buffer)

    with monkeypatch.context() as m:
        m.setattr(psycopg.Copy, "write", write)
        if not c_module:
            m.setattr(bulk, "_row_formatter", lambda cur, types: None)
        with conn.transaction(), conn.cursor() as cur:
            assert bulk.copy_rows(cur, schema, table, list(TYPES), _rows(), TYPES)
    return b"".join(sent)


def test_rows_formatted_by_psycopg_are_the_encoders_bytes(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = fresh_schema()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        for table in ("old", "new"):
            conn.execute(
                f'CREATE TABLE "{schema}".{table} (id text PRIMARY KEY, n int4, big int8, at float8, flag bool,'
                " md jsonb, vec vector, note text)"
            )
        old = _copy(conn, schema, "old", monkeypatch, c_module=False)
        new = _copy(conn, schema, "new", monkeypatch, c_module=True)
        assert new == old
        read = [
            conn.execute(f'SELECT *, vec::text, md::text FROM "{schema}".{t} ORDER BY id').fetchall()
            for t in ("old", "new")
        ]
        assert read[0] == read[1] and len(read[0]) == 150
        row = conn.execute(f'SELECT note, at FROM "{schema}".new WHERE id = %s', ("r0011",)).fetchone()
        assert row == ("11", 11 / 7)
        assert conn.execute(f'SELECT at FROM "{schema}".new WHERE id = %s', ("r0010",)).fetchone() == (10.0,)
