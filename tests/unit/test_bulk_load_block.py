"""``FinderLedge.bulk_load()`` outside PostgreSQL: its argument is validated, and in local mode the block
changes nothing (each call is stored when it returns).  Postgres mode: tests/integration/test_postgres_bulk_load.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.errors import ConfigurationError


@pytest.mark.parametrize("chunks", [0, -5, 2.5, "many", True])
def test_bulk_load_refuses_a_size_that_is_not_a_positive_integer(tmp_path: Path, chunks: Any) -> None:
    with FinderLedge(tmp_path / "a", embedding=DeterministicFakeEmbedding(size=16)) as fl:
        with (
            pytest.raises(ConfigurationError, match="chunks: expected a positive integer"),
            fl.bulk_load(chunks),
        ):
            pass
        fl.add_texts(["still writable after the refusal"])
        assert fl.count()["chunks"] == 1


def test_bulk_load_in_local_mode_changes_nothing(tmp_path: Path) -> None:
    with FinderLedge(tmp_path / "a", embedding=DeterministicFakeEmbedding(size=16)) as fl:
        with fl.bulk_load(chunks=40):
            fl.add_texts([f"local text {i}" for i in range(20)])
            assert fl.search("local text 7", k=1)[0].content == "local text 7"  # each call is stored at once
            fl.add_texts([f"local text {i}" for i in range(20, 40)])
        assert fl.count()["chunks"] == 40
