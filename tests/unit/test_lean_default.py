"""Issue 29, lean default: FAISS for new directories, Chroma an extra, recorded stores kept, clear errors."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, Settings
from finderledge.errors import MissingExtraError

ROOT = Path(__file__).resolve().parents[2]
FAKE = DeterministicFakeEmbedding(size=8)
TEXTS = ["refunds are issued within 30 days", "the warranty covers two years of repairs"]


def _open(directory: Path, **settings: object) -> FinderLedge:
    return FinderLedge(directory, embedding=FAKE, env_file=None, show_progress=False, **settings)


def _recorded(directory: Path) -> dict:
    con = sqlite3.connect(directory / "ledger.sqlite3")
    try:
        return json.loads(con.execute("SELECT value FROM info WHERE key='settings'").fetchone()[0])
    finally:
        con.close()


def test_a_new_directory_uses_faiss_and_records_it(tmp_path: Path) -> None:
    with _open(tmp_path / "idx") as fl:
        fl.add_texts(TEXTS)
        assert fl.settings.vector_store == "faiss"
        assert fl.search(TEXTS[1], k=1, search_mode="vector")[0].document.page_content == TEXTS[1]
    assert (tmp_path / "idx" / "faiss").is_dir() and not (tmp_path / "idx" / "chroma").exists()
    assert _recorded(tmp_path / "idx")["vector_store"] == "faiss"


def test_a_chroma_directory_stays_chroma_when_reopened(tmp_path: Path) -> None:
    with _open(tmp_path / "idx", vector_store="chroma") as fl:
        fl.add_texts(TEXTS)
    with _open(tmp_path / "idx") as fl:  # no argument: the recorded store, not the new default
        assert fl.settings.vector_store == "chroma"
        assert fl.search(TEXTS[1], k=1, search_mode="vector")[0].document.page_content == TEXTS[1]
        assert fl.stats()["vector_index_chunks"] == 2
    assert not (tmp_path / "idx" / "faiss").exists()
    assert _recorded(tmp_path / "idx")["vector_store"] == "chroma"


def test_a_directory_that_recorded_no_store_was_built_on_chroma(tmp_path: Path) -> None:
    with _open(tmp_path / "idx", vector_store="chroma") as fl:
        fl.add_texts(TEXTS)
    recorded = _recorded(tmp_path / "idx")
    del recorded["vector_store"]  # as written before the store was part of the recorded settings
    con = sqlite3.connect(tmp_path / "idx" / "ledger.sqlite3")
    with con:
        con.execute("UPDATE info SET value=? WHERE key='settings'", (json.dumps(recorded),))
    con.close()
    with _open(tmp_path / "idx") as fl:
        assert fl.settings.vector_store == "chroma"
    assert not (tmp_path / "idx" / "faiss").exists()


def test_the_environment_still_picks_chroma_for_a_new_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FINDERLEDGE_VECTOR_STORE", "chroma")
    with FinderLedge(tmp_path / "idx", embedding=FAKE, show_progress=False) as fl:
        assert fl.settings.vector_store == "chroma"


def test_a_chroma_server_url_alone_means_the_chroma_store() -> None:
    assert Settings.resolve({}, environ={}, env_file=None).vector_store == "faiss"
    url = {"chroma_url": "http://localhost:8000"}
    assert Settings.resolve(url, environ={}, env_file=None).vector_store == "chroma"
    env = {"FINDERLEDGE_CHROMA_URL": "http://localhost:8000"}
    assert Settings.resolve({}, environ=env, env_file=None).vector_store == "chroma"
    said = Settings.resolve({**url, "vector_store": "faiss"}, environ={}, env_file=None)
    assert said.vector_store == "faiss"  # what the user said wins
    recorded = Settings.resolve(url, environ={}, env_file=None, defaults={"vector_store": "faiss"})
    assert recorded.vector_store == "faiss"


WITHOUT_CHROMADB = """
import sys
sys.modules["chromadb"] = None  # as if not installed: "import chromadb" raises ImportError
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedge
from finderledge.errors import MissingExtraError
fake = DeterministicFakeEmbedding(size=8)
with FinderLedge(sys.argv[1] + "/default", embedding=fake, env_file=None) as fl:  # the default needs no chromadb
    fl.add_texts(["refunds within 30 days"])
    assert fl.search("refunds", k=1)[0].document.page_content == "refunds within 30 days"
try:
    FinderLedge(sys.argv[1] + "/chroma", embedding=fake, vector_store="chroma", env_file=None)
except MissingExtraError as exc:
    assert isinstance(exc, ImportError) and exc.name == "chromadb" and exc.extra == "chroma"
    print(exc)
else:
    raise SystemExit("no error")
"""


def test_without_chromadb_the_default_works_and_chroma_names_its_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_CHROMADB, str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "vector_store='chroma' needs the chromadb package, which is not installed: "
        'pip install "finderledge[chroma]"'
    )


def test_missing_extra_error_is_an_import_error_naming_the_extra() -> None:
    exc = MissingExtraError("feature x", "somepkg", "someextra")
    assert isinstance(exc, ImportError) and exc.name == "somepkg"
    assert 'pip install "finderledge[someextra]"' in str(exc)


def test_chromadb_is_an_extra_not_a_core_dependency() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = [dep.split(">")[0].split("=")[0].split("[")[0].strip() for dep in project["dependencies"]]
    assert "chromadb" not in names and "faiss-cpu" in names
    extras = project["optional-dependencies"]
    assert any(dep.startswith("chromadb") for dep in extras["chroma"])
    assert any(dep.startswith("chromadb") for dep in extras["test"])  # the test layers run Chroma
    assert any(dep.startswith("finderledge[test") for dep in extras["dev"])  # and so does the whole suite
