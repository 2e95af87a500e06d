"""``keyword_index`` is recorded in a directory like ``vector_index``: ``check --repair`` (CLI and API), opened
without the setting, repairs a damaged ``qdrant_keyword/`` (the keyword leg in a local Qdrant), and a later
open without it searches the leg the directory was built with."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from fake_dirs import open_fake

from finderledge.cli.commands import main
from finderledge.replica.checking import check_directory

pytest.importorskip("qdrant_client")  # finderledge[qdrant]
from finderledge.vector_stores.qdrant_keyword import QdrantKeywordIndex

TEXTS = [f"Note {i} about {w}." for i, w in enumerate(["glaciers", "tides", "passwords", "orchards"] * 5)]


def _built(root: Path) -> list[tuple[str, float]]:
    """A Qdrant directory whose keyword leg is in Qdrant; its keyword hits for one query."""
    with open_fake(root, vector_store="qdrant", keyword_index="engine") as fl:
        fl.add_texts(TEXTS)
        return fl.keyword_store.search("tides glaciers", 10)


def _damage(root: Path) -> None:
    """Flip a byte of the keyword collection's storage (its seal no longer matches)."""
    stored = next((root / "qdrant_keyword").rglob("storage.sqlite"))
    raw = bytearray(stored.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    stored.write_bytes(bytes(raw))


def _recorded(root: Path) -> dict[str, object]:
    with closing(sqlite3.connect(root / "ledger.sqlite3")) as con:
        (value,) = con.execute("SELECT value FROM info WHERE key = 'settings'").fetchone()
    return json.loads(value)  # type: ignore[no-any-return]


def test_the_directory_records_its_keyword_index(tmp_path: Path) -> None:
    root = tmp_path / "index"
    before = _built(root)
    assert _recorded(root)["keyword_index"] == "engine"
    with open_fake(root) as again:  # neither vector_store nor keyword_index given: the recorded ones
        assert again.settings.keyword_index == "engine"
        assert isinstance(again.keyword_store, QdrantKeywordIndex)
        assert again.keyword_store.search("tides glaciers", 10) == before
    assert not (root / "bm25").exists()  # no local replica was built beside it


def test_check_repair_on_the_command_line_repairs_the_keyword_collection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "index"
    before = _built(root)
    _damage(root)
    code = main(["check", "--dir", str(root), "--repair", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1, report
    assert any("keyword index" in p and "qdrant_keyword" in p for p in report["problems"]), report
    assert any(r.startswith("keyword index") for r in report["repaired"]), report
    assert not report["not_repaired"], report
    assert list(root.glob("qdrant_keyword.corrupt-*")), "the damaged collection was not moved aside"
    assert not check_directory(root).problems
    with open_fake(root) as again:
        assert again.keyword_store.search("tides glaciers", 10) == before


def test_check_repair_through_the_api_repairs_the_keyword_collection(tmp_path: Path) -> None:
    root = tmp_path / "index"
    before = _built(root)
    _damage(root)
    with open_fake(
        root
    ) as fl:  # opened without keyword_index: opening finds the damage first and rebuilds it
        report = fl.check(repair=True)
        assert report.clean and not report.not_repaired, report.text()
        assert fl.keyword_store.search("tides glaciers", 10) == before
    assert list(root.glob("qdrant_keyword.corrupt-*")), "the damaged collection was not moved aside"
    assert not check_directory(
        root
    ).problems  # the local leg's repair would have left qdrant_keyword/ damaged


def test_another_keyword_index_given_is_searched_and_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Both legs are kept from the ledger, so a different value is not refused (unlike ``vector_index``, whose
    files would be of another kind): it is searched, recorded with a warning naming both, and followed next."""
    root = tmp_path / "index"
    before = _built(root)
    with caplog.at_level("WARNING", logger="finderledge"), open_fake(root, keyword_index="local") as fl:
        assert not isinstance(fl.keyword_store, QdrantKeywordIndex)
        fl.add_texts(["Note about tides and glaciers again."])
    assert any("keyword_index 'local' recorded (was 'engine')" in r.getMessage() for r in caplog.records)
    assert _recorded(root)["keyword_index"] == "local"
    with open_fake(root) as fl:
        assert fl.settings.keyword_index == "local" and not isinstance(fl.keyword_store, QdrantKeywordIndex)
    with open_fake(root, keyword_index="engine") as fl:  # back: the Qdrant leg catches up from the ledger
        assert isinstance(fl.keyword_store, QdrantKeywordIndex)
        fl.refresh()
        assert len(fl.keyword_store) == len(TEXTS) + 1
        assert fl.keyword_store.search("tides glaciers", 10) != before  # the new note is indexed there too
    assert _recorded(root)["keyword_index"] == "engine"


def test_a_directory_recorded_before_keyword_index_was_searches_the_leg_it_checkpoints(
    tmp_path: Path,
) -> None:
    root = tmp_path / "index"
    before = _built(root)
    settings = _recorded(root)
    del settings["keyword_index"]  # as recorded before this setting was
    with closing(sqlite3.connect(root / "ledger.sqlite3")) as con, con:
        con.execute("UPDATE info SET value = ? WHERE key = 'settings'", (json.dumps(settings),))
    with open_fake(root) as fl:
        assert isinstance(fl.keyword_store, QdrantKeywordIndex)
        assert fl.keyword_store.search("tides glaciers", 10) == before
    assert "keyword_index" not in _recorded(root)  # opening wrote nothing
