"""``finderledge check [--repair] [--json]`` and ``FinderLedge.check()``: damage is found, explained in
plain words and (what the ledger can rebuild) repaired; a check without ``--repair`` changes nothing."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from fake_dirs import file_digests, open_fake

from finderledge.cli.commands import main

TEXTS = [f"Note {i} about {w}." for i, w in enumerate(["glaciers", "tides", "passwords", "orchards"] * 5)]


@pytest.fixture(scope="module", params=["faiss", "chroma"])
def template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"check-{request.param}") / "index"
    with open_fake(root, vector_store=request.param) as fl:
        fl.add_texts(TEXTS[:10])
        fl.add_texts(TEXTS[10:])
    return root


@pytest.fixture
def built(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "index"
    shutil.copytree(template, root)
    return root


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:
    code = main(["check", *args, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


def test_a_clean_directory_checks_clean(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = file_digests(built)
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 0 and report["clean"] and report["problems"] == [], report
    if not (built / "chroma").exists():  # Chroma applies its own log as it opens
        assert file_digests(built) == before
    with open_fake(built) as fl:
        assert fl.check().clean


def test_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--dir", str(tmp_path / "nothing")]) == 2
    assert main(["check", "--no-such-option"]) == 2


def test_a_flipped_index_byte_is_reported_then_repaired(
    built: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = next((built / "bm25").rglob("docs.npy"))
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 0x40
    target.write_bytes(bytes(raw))
    before = file_digests(built / "bm25")
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 1 and not report["clean"]
    assert any("keyword index" in p and "checksum" in p and "docs.npy" in p for p in report["problems"]), (
        report
    )
    assert file_digests(built / "bm25") == before  # a check alone changes nothing
    with open_fake(built) as fl:  # opening may find it first (a merge reads every posting) and rebuild it
        repaired = fl.check(repair=True)
        assert any("keyword index" in r for r in repaired.repaired) or any(
            "bm25.corrupt-" in n for n in repaired.notes
        ), repaired
        assert fl.check().clean
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 0, report


@pytest.mark.parametrize("how", ["3-byte embedding", "wrong parent_id", "deep metadata"])
def test_a_damaged_ledger_row_is_named_and_not_repairable(
    built: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    con = sqlite3.connect(built / "ledger.sqlite3")
    cid, parent = con.execute("SELECT id, parent_id FROM chunks ORDER BY id LIMIT 1").fetchone()
    if how == "3-byte embedding":
        con.execute("UPDATE chunks SET embedding=? WHERE id=?", (b"abc", cid))
    elif how == "wrong parent_id":
        other = con.execute("SELECT id FROM documents WHERE id != ? LIMIT 1", (parent,)).fetchone()[0]
        con.execute("UPDATE chunks SET parent_id=? WHERE id=?", (other, cid))
    else:
        con.execute("UPDATE chunks SET metadata=? WHERE id=?", ("[" * 200_000 + "]" * 200_000, cid))
    con.commit()
    con.close()
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 1 and any(cid in p for p in report["problems"]), report
    with open_fake(built) as fl:
        result = fl.check(repair=True)
    assert not result.clean and any(parent in n and "cannot be rebuilt" in n for n in result.not_repaired)


def test_damaged_ledger_pages_are_found_by_check(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = built / "ledger.sqlite3"
    data = bytearray(ledger.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    for i in range(8):  # the b-tree header of the last page
        data[len(data) - size + i] ^= 0xFF
    ledger.write_bytes(bytes(data))
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 1 and any("backup" in p for p in report["problems"]), report


def test_a_link_is_reported_without_being_followed(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (built / "write.lock.owner").unlink(missing_ok=True)
    (built / "write.lock.owner").symlink_to(outside)
    code, report = _cli(capsys, "--dir", str(built))
    assert code == 1 and any("write.lock.owner" in p for p in report["problems"])
    assert outside.read_text() == "keep"
