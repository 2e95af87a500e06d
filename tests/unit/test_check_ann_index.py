"""Issue 39: ``finderledge check`` verifies the FAISS approximate index file (``index.faiss``, written for a
``vector_index`` other than flat) as it verifies the store's other files: a flipped byte there is a problem
naming the file, ``check --repair`` rebuilds it, and a check alone writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fake_dirs import file_digests, open_fake

from finderledge.cli.commands import main
from finderledge.vector_stores.faiss import ANN_FILE

TEXTS = [f"Note {i} about {w}." for i, w in enumerate(["glaciers", "tides", "passwords", "orchards"] * 6)]


def _check(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, dict]:
    code = main(["check", "--dir", str(root), *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("kind", ["hnsw", "ivf_pq"])
def test_a_flipped_byte_in_the_approximate_index_is_reported_then_repaired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)  # an approximate index over 24 rows
    root = tmp_path / "index"
    with open_fake(root, vector_index=kind) as fl:
        fl.add_texts(TEXTS)
    (target,) = (root / "faiss" / "segments").glob(f"seg-*/{ANN_FILE}")
    assert json.loads((root / "faiss" / "manifest.json").read_text())["ann"]["kind"] == kind
    code, report = _check(capsys, root)
    assert code == 0 and report["problems"] == [], report

    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0x40
    target.write_bytes(bytes(raw))
    before = file_digests(root)
    code, report = _check(capsys, root)
    assert code == 1 and not report["clean"], report
    assert any("vector index" in p and ANN_FILE in p for p in report["problems"]), report
    assert file_digests(root) == before  # a check alone writes nothing

    code, report = _check(capsys, root, "--repair")
    assert any("vector index" in r for r in report["repaired"]), report
    code, report = _check(capsys, root)
    assert code == 0 and report["problems"] == [], report
    manifest = json.loads((root / "faiss" / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == kind  # rebuilt as the recorded kind, its file checked again above
    with open_fake(root) as fl:
        assert fl.check().clean
        assert len(fl.search("glaciers", k=5)) == 5


def test_a_flipped_byte_in_any_faiss_file_of_an_hnsw_directory_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of ``faiss/`` (segments, tombstones, the approximate index, the manifest), one at a time."""
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)
    source = tmp_path / "source"
    with open_fake(source, vector_index="hnsw") as fl:
        fl.add_texts(TEXTS[:12])
        fl.add_texts(TEXTS[12:])
        fl.delete([fl.list_documents()[1].id])  # a tombstone file
    names = sorted(
        str(p.relative_to(source))
        for p in (source / "faiss").rglob("*")
        if p.is_file() and p.stat().st_size > 0
    )
    assert any(n.endswith(ANN_FILE) for n in names), names
    for n, name in enumerate(names):
        root = tmp_path / f"copy{n}"
        shutil.copytree(source, root)
        raw = bytearray((root / name).read_bytes())
        raw[len(raw) // 2] ^= 0x10
        (root / name).write_bytes(bytes(raw))
        code, report = _check(capsys, root)
        assert code == 1 and any("vector index" in p for p in report["problems"]), (name, report)
