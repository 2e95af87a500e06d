"""``finderledge check --repair`` end to end with the real default model: a flipped byte in a FAISS
``vectors.npy`` is reported (exit 1), rebuilt from the ledger, and the next check is clean (exit 0)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.cli.commands import main


def test_check_repair_rebuilds_a_flipped_vector_file(
    tmp_path: Path, minilm: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "index"
    with FinderLedge(root, vector_store="faiss", embedding=minilm, show_progress=False) as fl:
        fl.add_texts(["Glaciers retreat in warm summers.", "Password reset links expire after one hour."])
        expected = [r.id for r in fl.search("glaciers", search_mode="vector", k=2)]
    vectors = next((root / "faiss").rglob("vectors.npy"))
    raw = bytearray(vectors.read_bytes())
    raw[-5] ^= 0x01
    vectors.write_bytes(bytes(raw))
    assert main(["check", "--dir", str(root), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any("vectors.npy" in p and "checksum" in p for p in report["problems"]), report
    assert main(["check", "--dir", str(root), "--repair", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any(r.startswith("vector index") for r in report["repaired"]), report
    assert main(["check", "--dir", str(root), "--json"]) == 0, capsys.readouterr().out
    with FinderLedge(root, embedding=minilm, show_progress=False) as fl:
        assert [r.id for r in fl.search("glaciers", search_mode="vector", k=2)] == expected


# ---------------------------------------------------------------------------------------------------
# Issue 39: check is a tool you can trust — damage is damage (exit 1, never a traceback), a full disk is a
# full disk, --repair needs no model and moves each damaged part aside once, every message is true
# ---------------------------------------------------------------------------------------------------
TEXTS = [f"Note {i} about {w}." for i, w in enumerate(["glaciers", "tides", "passwords", "orchards"] * 4)]
LONG = "Glaciers retreat in warm summers and advance in cold winters. " * 40  # several chunks


@pytest.fixture(scope="module", params=["faiss", "chroma"])
def template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Path:
    """A directory built with the bundled model (the CLI reopens it without naming one)."""
    root = tmp_path_factory.mktemp(f"trust-{request.param}") / "index"
    with FinderLedge(root, vector_store=request.param, embedding=minilm, show_progress=False) as fl:
        fl.add_texts(TEXTS)
        fl.add_texts([LONG], metadatas=[{"title": "long"}])
    return root


@pytest.fixture
def built(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "index"
    shutil.copytree(template, root)
    return root


def _check(capsys: pytest.CaptureFixture[str], root: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    code = main(["check", "--dir", str(root), "--json", *extra])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else {}, out.err


def _follow_advice(
    capsys: pytest.CaptureFixture[str], root: Path, parent: str, report: dict[str, Any]
) -> None:
    """What check says to do about a damaged row works: ``finderledge remove ID``, then the check is clean."""
    advice = [n for n in report["not_repaired"] if parent in n]
    assert advice and all(f"finderledge remove {parent}" in n for n in advice), report
    assert not any("left out of results" in n for n in advice), advice  # not true of every damage kind
    assert main(["remove", "--dir", str(root), parent]) == 0, capsys.readouterr()
    capsys.readouterr()
    code, after, err = _check(capsys, root)
    assert code == 0 and after["clean"], (after["problems"], err)


def test_a_vector_of_the_wrong_width_is_damage_naming_its_chunk(
    built: Path, minilm: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: exit 2 and a bare ``AssertionError`` (FAISS) or Chroma's ``InvalidArgumentError``."""
    con = sqlite3.connect(built / "ledger.sqlite3")
    cid, parent = con.execute("SELECT id, parent_id FROM chunks ORDER BY id LIMIT 1").fetchone()
    con.execute("UPDATE chunks SET embedding=? WHERE id=?", (np.ones(8, dtype="<f4").tobytes(), cid))
    con.commit()
    con.close()
    code, report, err = _check(capsys, built)
    assert code == 1, (report, err)
    assert any(cid in p and "8 values" in p for p in report["problems"]), report
    assert "error" not in err and "Traceback" not in err, err
    shutil.rmtree(built / ("faiss" if (built / "faiss").is_dir() else "chroma"))
    with FinderLedge(built, embedding=minilm, show_progress=False) as fl:  # rebuilt without the bad row
        assert fl.search("glaciers", search_mode="vector", k=3)
    code, report, err = _check(capsys, built)
    assert code == 1 and len(report["problems"]) == 1 and cid in report["problems"][0], report["problems"]
    code, report, err = _check(capsys, built, "--repair")
    assert code == 1 and "Traceback" not in err, (report, err)
    _follow_advice(capsys, built, parent, report)


@pytest.mark.parametrize("where", ["chunk text", "document text"])
def test_ledger_text_that_no_longer_matches_its_hash_is_damage(
    built: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """Before: exit 0, "no damage found"."""
    con = sqlite3.connect(built / "ledger.sqlite3")
    if where == "chunk text":  # a chunk of the long document, which stores its own text
        cid, parent = con.execute(
            "SELECT id, parent_id FROM chunks WHERE content != X'' ORDER BY id LIMIT 1"
        ).fetchone()
        con.execute("UPDATE chunks SET content = content || ' tampered' WHERE id=?", (cid,))
    else:  # a one-chunk note: its chunk's text is its document's
        cid, parent = con.execute(
            "SELECT id, parent_id FROM chunks WHERE content = X'' ORDER BY id LIMIT 1"
        ).fetchone()
        con.execute("UPDATE documents SET content = 'Tampered.' WHERE id=?", (parent,))
    con.commit()
    con.close()
    code, report, err = _check(capsys, built)
    assert code == 1, (report, err)
    assert any(cid in p and "hash" in p for p in report["problems"]), report
    code, report, _ = _check(capsys, built, "--repair")
    assert code == 1
    _follow_advice(capsys, built, parent, report)


def _custom(root: Path) -> FinderLedge:
    return FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    )  # type: ignore[arg-type]


@pytest.mark.parametrize("damaged", ["faiss", "bm25", "both"])
def test_repair_needs_no_model_and_moves_each_damaged_index_aside_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damaged: str
) -> None:
    """Before: ``check --repair`` on a directory built with a custom embedding exited 2 ("built with
    embedding model 'DeterministicFakeEmbedding'"); with the model given, faiss/ was moved aside twice."""
    root = tmp_path / "index"
    with _custom(root) as fl:
        fl.add_texts(TEXTS)
        expected = {
            m: [r.id for r in fl.search("glaciers", search_mode=m, k=4)] for m in ("keyword", "vector")
        }
    folders = {"faiss": ["faiss"], "bm25": ["bm25"], "both": ["faiss", "bm25"]}[damaged]
    for folder in folders:
        target = next((root / folder).rglob("vectors.npy" if folder == "faiss" else "docs.npy"))
        raw = bytearray(target.read_bytes())
        raw[-5] ^= 0x01
        target.write_bytes(bytes(raw))
    code, report, err = _check(capsys, root, "--repair")
    assert code == 1, (report, err)
    legs = {"faiss": "vector", "bm25": "keyword"}
    for folder in folders:
        assert any(r.startswith(f"{legs[folder]} index") for r in report["repaired"]), report
    asides = sorted(p.name.split(".corrupt-")[0] for p in root.iterdir() if ".corrupt-" in p.name)
    assert asides == sorted(folders)  # each damaged part moved aside once, nothing else
    code, report, err = _check(capsys, root)
    assert code == 0, (report, err)
    with _custom(root) as fl:
        assert {m: [r.id for r in fl.search("glaciers", search_mode=m, k=4)] for m in expected} == expected


def test_the_quarantine_warning_says_what_works(
    built: Path, minilm: Any, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Before: the warning said ``finderledge check --repair`` removes the document, and it does not."""
    con = sqlite3.connect(built / "ledger.sqlite3")
    cid, parent = con.execute(
        "SELECT c.id, c.parent_id FROM chunks c JOIN documents d ON d.id = c.parent_id"
        " WHERE d.content LIKE 'Note 0 %'"
    ).fetchone()
    con.execute("UPDATE chunks SET metadata=? WHERE id=?", ("[" * 200_000 + "]" * 200_000, cid))
    con.commit()
    con.close()
    with (
        caplog.at_level("WARNING", logger="finderledge"),
        FinderLedge(built, embedding=minilm, show_progress=False) as fl,
    ):
        hits = fl.search("Note 0 about glaciers", search_mode="keyword", k=20)
    assert hits and parent not in {h.id.rpartition("-")[0] for h in hits}  # "left out of results": true
    warnings = [r.getMessage() for r in caplog.records if "quarantined" in r.getMessage()]
    assert warnings and all(f"finderledge remove {parent}" in w for w in warnings), warnings
    assert not any("--repair" in w for w in warnings), warnings
    code, report, _ = _check(capsys, built, "--repair")
    assert code == 1 and not any("--repair" in n for n in report["not_repaired"]), report
    _follow_advice(capsys, built, parent, report)  # what the warning and the check say to do works
