"""``finderledge check --repair`` end to end with the real default model: a flipped byte in a FAISS
``vectors.npy`` is reported (exit 1), rebuilt from the ledger, and the next check is clean (exit 0)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from finderledge import FinderLedge
from finderledge.cli import main


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
