"""Files a third-party store reads itself (Chroma's SQLite and HNSW files, qdrant-client's local storage) are
sealed by FinderLedge and never handed over unless they match the seal (issue 39).

The attacks are the same for every backend: a planted pickle row (with a canary file its code would create),
a flipped byte in each file of each backend (found by ``finderledge check``, repaired by ``--repair``), and
``check`` itself, which must not write a byte anywhere in the directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import sqlite3
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.cli.commands import main
from finderledge.errors import IndexCorruptError
from finderledge.storage.seals import SEAL_FILE, Seal

TEXTS = [
    "Glaciers retreat in warm summers.",
    "Password reset links expire after one hour.",
    "Tides follow the moon.",
]
BACKENDS = ("faiss", "chroma", "qdrant")
QDRANT_DB = "qdrant/collection/finderledge/storage.sqlite"


def _open(root: Path, **kwargs: object) -> FinderLedge:
    return FinderLedge(
        root, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None, **kwargs
    )  # type: ignore[arg-type]


def _digests(root: Path) -> dict[str, str]:
    """Every file under ``root`` (links not followed) with the SHA-256 of its bytes."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            out[rel] = "link" if path.is_symlink() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One built, closed directory per backend (copied by each test)."""
    out = {}
    for kind in BACKENDS:
        root = tmp_path_factory.mktemp(f"sealed-{kind}") / "index"
        with _open(root, vector_store=kind) as fl:
            fl.add_texts(TEXTS)
        out[kind] = root
    return out


def _copy(templates: dict[str, Path], kind: str, tmp_path: Path) -> Path:
    root = tmp_path / "index"
    shutil.copytree(templates[kind], root, symlinks=True)
    return root


def _asides(root: Path, folder: str) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith(f"{folder}.corrupt-"))


# ---------------------------------------------------------------------------------------------------
# 1. A planted pickle never runs
# ---------------------------------------------------------------------------------------------------
class _Canary:
    """A pickle whose loading creates a file: what a crafted row of qdrant-client's storage would do."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (Path.write_text, (Path(self.path), "planted code ran"))  # type: ignore[return-value]


def _plant_pickle(db: Path, canary: Path) -> None:
    con = sqlite3.connect(db)
    con.execute("INSERT INTO points VALUES (?, ?)", ("planted", pickle.dumps(_Canary(canary))))
    con.commit()
    con.close()


def test_a_planted_pickle_in_qdrant_storage_never_runs(templates: dict[str, Path], tmp_path: Path) -> None:
    root = _copy(templates, "qdrant", tmp_path)
    canary = tmp_path / "canary.txt"
    _plant_pickle(root / QDRANT_DB, canary)
    assert main(["check", "--dir", str(root)]) == 1  # the directory is reported, read-only
    assert not canary.exists()
    with _open(root) as fl:  # the recorded backend is used: no backend named
        assert fl.settings.vector_store == "qdrant"
        hits = fl.search("glaciers", k=3, search_mode="vector")
        assert {h.content for h in hits} == set(TEXTS)
    assert not canary.exists(), "qdrant-client unpickled a row FinderLedge did not seal"
    aside = _asides(root, "qdrant")
    assert len(aside) == 1 and (aside[0] / QDRANT_DB.split("/", 1)[1]).is_file()  # kept for inspection
    with _open(root) as fl:  # the rebuilt folder is sealed: opened as it is, nothing moved again
        assert len(fl.search("tides", k=1, search_mode="vector")) == 1
    assert len(_asides(root, "qdrant")) == 1
    assert main(["check", "--dir", str(root)]) == 0


def test_a_seal_copied_with_the_files_does_not_pass_without_the_key(
    templates: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crafted directory may carry a seal that matches its files: only this user's key makes it pass."""
    root = _copy(templates, "qdrant", tmp_path)
    canary = tmp_path / "canary.txt"
    _plant_pickle(root / QDRANT_DB, canary)
    with monkeypatch.context() as attacker:  # the attacker's own key (a config folder of their own)
        attacker.setenv("XDG_CONFIG_HOME", str(tmp_path / "attacker-config"))
        Seal(root / "qdrant", {".lock"}).write()  # a seal that matches the planted row
    with pytest.raises(IndexCorruptError, match="seal"):
        Seal(root / "qdrant", {".lock"}).verify()
    with _open(root) as fl:
        assert len(fl.search("glaciers", k=3, search_mode="vector")) == 3
    assert not canary.exists()


# ---------------------------------------------------------------------------------------------------
# 2. A flipped byte in any file of any backend: found by check (naming the file), repaired by --repair
# ---------------------------------------------------------------------------------------------------
def _flippable(root: Path, kind: str) -> list[str]:
    """The index files of ``root`` whose bytes a flip can damage (not locks, counters, empty files)."""
    skip = {"write.lock", "write.lock.owner", "generation", ".lock", "replica.json"}
    out = []
    for folder in ("bm25", kind):
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.name not in skip and path.stat().st_size > 0:
                out.append(str(path.relative_to(root)))
    return out


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_flipped_byte_in_every_file_is_found_by_check_and_repaired(
    templates: dict[str, Path], tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    names = _flippable(templates[kind], kind)
    assert len(names) >= 3, names
    missed, unrepaired = [], []
    for i, name in enumerate(names):
        root = _copy(templates, kind, tmp_path / str(i))
        _flip(root / name)
        before = _digests(root)
        capsys.readouterr()
        code = main(["check", "--dir", str(root), "--json"])
        report = json.loads(capsys.readouterr().out)
        assert _digests(root) == before, f"check wrote into the directory ({name})"
        if code != 1 or not any(
            Path(name).name in p or Path(name).parent.name in p for p in report["problems"]
        ):
            missed.append((name, code, report["problems"]))
            continue
        with _open(root) as fl:  # repair in Python: the CLI opens with the default model (not this fake)
            fl.check(repair=True)
        if main(["check", "--dir", str(root), "--json"]) != 0:
            unrepaired.append((name, capsys.readouterr().out))
            continue
        with _open(root) as fl:
            assert {h.content for h in fl.search("glaciers", k=3, search_mode="vector")} == set(TEXTS)
            assert {
                h.content for h in fl.search("glaciers tides password", k=3, search_mode="keyword")
            } == set(TEXTS)
    assert not missed, f"{len(missed)} of {len(names)} flips not reported: {missed}"
    assert not unrepaired, unrepaired


# ---------------------------------------------------------------------------------------------------
# 3. check is read-only: no byte written anywhere in the directory, for every backend
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", BACKENDS)
def test_check_writes_nothing(templates: dict[str, Path], tmp_path: Path, kind: str) -> None:
    root = _copy(templates, kind, tmp_path)
    before = _digests(root)
    assert main(["check", "--dir", str(root)]) == 0
    assert _digests(root) == before
    with _open(root) as fl:  # a reader that searched: still clean, and check still writes nothing
        fl.search("glaciers", k=2)
    before = _digests(root)
    assert main(["check", "--dir", str(root)]) == 0
    assert _digests(root) == before


# ---------------------------------------------------------------------------------------------------
# 4. The seal itself
# ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("change", ["extra file", "missing file", "hard link", "symlink", "no seal"])
def test_anything_the_seal_does_not_record_is_refused(tmp_path: Path, change: str) -> None:
    folder = tmp_path / "store"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "data.bin").write_bytes(b"abc" * 100)
    (folder / "db").write_bytes(b"xyz")
    (folder / "own.lock").write_bytes(b"")
    seal = Seal(folder, {"own.lock"})
    seal.write()
    Seal(folder, {"own.lock"}).verify()
    (folder / "own.lock").write_bytes(b"our own files change freely")
    Seal(folder, {"own.lock"}).verify()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    if change == "extra file":
        (folder / "sub" / "planted.bin").write_bytes(b"")
    elif change == "missing file":
        (folder / "db").unlink()
    elif change == "hard link":
        (folder / "db").unlink()
        os.link(outside, folder / "db")
    elif change == "symlink":
        (folder / "db").unlink()
        (folder / "db").symlink_to(outside)
    else:
        (folder / SEAL_FILE).unlink()
    with pytest.raises(IndexCorruptError):
        Seal(folder, {"own.lock"}).verify()
    assert outside.read_text() == "precious"


def test_a_temp_file_of_our_own_left_by_a_killed_writer_is_no_damage(tmp_path: Path) -> None:
    """A writer SIGKILLed inside the seal's atomic replace left ``.seal.json.tmp-<pid>-<hex>`` beside the seal;
    the next reader called the folder damaged and rebuilt it (the Chroma stress test in CI).  Our own temp
    files are not the library's: ignored.  A file of that shape for a name that is not ours still counts."""
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / "db").write_bytes(b"xyz")
    Seal(folder, {"own.lock"}).write()
    (folder / f".{SEAL_FILE}.tmp-12345-0d3c0914").write_bytes(b'{"format": 1, "open"')
    (folder / ".own.lock.tmp-12345-0d3c0915").write_bytes(b"")
    Seal(folder, {"own.lock"}).verify()
    (folder / ".db.tmp-12345-0d3c0916").write_bytes(b"planted")
    with pytest.raises(IndexCorruptError, match="does not record"):
        Seal(folder, {"own.lock"}).verify()
