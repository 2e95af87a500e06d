"""A persist directory given as a relative path is the folder it named when the index was opened: a process that
changes its working directory afterwards (a server, a notebook, a test that restores its cwd before the
index is garbage-collected) still writes, checkpoints and reads there, never into a folder of the same name
under the new working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fake_dirs import open_fake


def test_a_relative_directory_stays_where_it_was_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(first)
    fl = open_fake(Path("./index"))
    try:
        assert fl.persist_directory == first / "index"
        monkeypatch.chdir(second)
        fl.add_texts(
            [f"note {i} about tides and glaciers" for i in range(30)], ids=[f"n{i}" for i in range(30)]
        )
        hits = fl.search("tides", k=3)
        assert len(hits) == 3
    finally:
        fl.close()
    assert not (second / "index").exists(), sorted(os.listdir(second / "index"))
    monkeypatch.chdir(tmp_path)
    with open_fake(first / "index") as again:
        assert again.count()["chunks"] == 30
