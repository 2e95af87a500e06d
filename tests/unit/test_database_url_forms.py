"""Issue 44, design 002: ``DATABASE_URL`` in SQLAlchemy's form (``postgresql+psycopg://…``, as the design's
section 7 writes it: "| DATABASE_URL | PostgreSQL接続URL | postgresql+psycopg://... |") is the same database as
``postgresql://…``: the driver suffix is dropped before libpq reads it (it was refused at the first connection)."""

from __future__ import annotations

import pytest

from finderledge.config import Settings
from finderledge.errors import ConfigurationError
from finderledge.storage.postgres import libpq_url, safe_name, scrub

pytest.importorskip("psycopg")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgresql+psycopg://u:p@db:5433/x", "postgresql://u:p@db:5433/x"),
        ("postgresql+psycopg2://u@db/x", "postgresql://u@db/x"),
        ("POSTGRESQL+asyncpg://u@db/x", "POSTGRESQL://u@db/x"),
        ("postgres+psycopg://u@db/x", "postgres://u@db/x"),
        ("postgresql://u@db/x?host=/run/pg+x", "postgresql://u@db/x?host=/run/pg+x"),  # unchanged
        ("postgres://db/x", "postgres://db/x"),
    ],
)
def test_the_driver_suffix_is_dropped(given: str, expected: str) -> None:
    assert libpq_url(given) == expected


def test_both_forms_name_the_same_database_and_hide_the_password() -> None:
    design = "postgresql+psycopg://app:s3cret@db.internal:5432/docs"
    assert safe_name(design, "ledger") == safe_name("postgresql://app:s3cret@db.internal:5432/docs", "ledger")
    assert safe_name(design, "ledger") == "postgresql://db.internal:5432/docs#ledger"
    shown = scrub(f"could not connect with {design} (postgresql+psycopg://app:s3cret@other/x)", design)
    assert "s3cret" not in shown and "app:" not in shown


def test_the_setting_accepts_the_design_form_and_still_refuses_other_schemes() -> None:
    assert Settings(database_url="postgresql+psycopg://u@db/x").database_url == "postgresql+psycopg://u@db/x"
    with pytest.raises(ConfigurationError, match="database_url"):
        Settings(database_url="mysql+pymysql://u@db/x")
