"""A crafted persist directory never makes FinderLedge read, write or delete anything outside it.

Each fixed-name file and folder of each local backend (the SQLite ledger, the lock files, ``bm25/``,
``faiss/``, ``chroma/`` and Chroma's own files, qdrant-client's local folder) is replaced by a symbolic link
to a file and to a folder outside; opening the directory (to search, or to write) must refuse it with an
error naming the link, and every byte outside must be unchanged.  Then every file of every backend (segment
files, Chroma's HNSW files, the ledger …) is replaced by a hard link or a symbolic link to an outside copy of
its own bytes (a link bit is all that tells them apart): either the directory is refused naming it, or the
index holding it is moved aside and rebuilt; never is a byte outside written.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.errors import IncompatibleIndexError, UnsafePathError
from finderledge.storage.files import Storage

TEXTS = ["Glaciers retreat in warm summers.", "Password reset links expire after one hour."]
COMMON = ["ledger.sqlite3", "write.lock", "write.lock.owner", "bm25"]
NAMES = {
    "faiss": COMMON + ["faiss"],
    "chroma": COMMON
    + [
        "chroma",
        "chroma/chroma.sqlite3",
        "chroma/write.lock",
        "chroma/write.lock.owner",
        "chroma/generation",
        "chroma/seal.json",
    ],
}
NAMES["qdrant"] = COMMON + [
    "qdrant",
    "qdrant/.lock",
    "qdrant/meta.json",
    "qdrant/collection/finderledge/storage.sqlite",
    "qdrant/seal.json",
]
CASES = [(kind, name) for kind, names in NAMES.items() for name in names]


def _fake() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def _open(root: Path, **kwargs: object) -> FinderLedge:
    return FinderLedge(root, embedding=_fake(), show_progress=False, env_file=None, **kwargs)  # type: ignore[arg-type]


def _tree(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed) with a digest of its content."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link:" + os.readlink(path)
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One built directory per backend (built once per module, copied by each test)."""
    out = {}
    for kind in NAMES:
        root = tmp_path_factory.mktemp(f"links-{kind}") / "index"
        with _open(root, vector_store=kind) as fl:
            fl.add_texts(TEXTS)
        with _open(root) as fl:  # a second writer session: every fixed file exists now
            fl.add_texts(["Tides follow the moon."])
        out[kind] = root
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder outside the persist directory: another application's SQLite file, a text file, a folder."""
    out = tmp_path / "outside"
    (out / "folder").mkdir(parents=True)
    (out / "folder" / "keep.txt").write_text("precious\n")
    con = sqlite3.connect(out / "app.sqlite3")
    con.execute("CREATE TABLE app (x)")
    con.execute("INSERT INTO app VALUES (1)")
    con.commit()
    con.close()
    (out / "notes.txt").write_text("do not overwrite\n")
    yield out


def _plant(root: Path, name: str, target: Path) -> None:
    path = root / name
    if path.is_dir() and not path.is_symlink():
        shutil.copytree(path, target / "copy", dirs_exist_ok=True) if target.is_dir() else None
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target, target_is_directory=target.is_dir())


def _target(outside: Path, name: str, to: str) -> Path:
    if to == "folder":
        return outside / "folder"
    return outside / ("app.sqlite3" if name.endswith("sqlite3") else "notes.txt")


@pytest.mark.parametrize("use", ["search", "write"])
@pytest.mark.parametrize("to", ["file", "folder"])
@pytest.mark.parametrize(("kind", "name"), CASES, ids=[f"{k}:{n}" for k, n in CASES])
def test_a_link_at_a_fixed_name_is_refused_and_nothing_outside_changes(
    templates: dict[str, Path], tmp_path: Path, outside: Path, kind: str, name: str, to: str, use: str
) -> None:
    root = tmp_path / "index"
    shutil.copytree(templates[kind], root, symlinks=True)
    _plant(root, name, _target(outside, name, to))
    before = _tree(outside)
    with pytest.raises(UnsafePathError) as caught:
        fl = _open(root)
        try:
            if use == "search":
                fl.search("glaciers", k=2)
                fl.search("glaciers", k=2, search_mode="vector")
            else:
                fl.add_texts(["Deserts are dry."])
        finally:
            fl.close()
    assert str(root / name) in str(caught.value)
    assert _tree(outside) == before


def test_a_link_to_the_ledger_of_another_application_never_gets_our_tables(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "index"
    root.mkdir()
    (root / "ledger.sqlite3").symlink_to(outside / "app.sqlite3")
    before = _tree(outside)
    with pytest.raises(UnsafePathError, match="ledger.sqlite3"):
        _open(root).close()
    assert _tree(outside) == before


def test_a_foreign_sqlite_file_is_never_given_our_tables(tmp_path: Path, outside: Path) -> None:
    """A regular file that is another application's database (no indexes beside it) is not adopted."""
    root = tmp_path / "index"
    root.mkdir()
    shutil.copy(outside / "app.sqlite3", root / "ledger.sqlite3")
    before = hashlib.sha256((root / "ledger.sqlite3").read_bytes()).hexdigest()
    with pytest.raises(IncompatibleIndexError, match="ledger.sqlite3"):
        _open(root).close()
    assert hashlib.sha256((root / "ledger.sqlite3").read_bytes()).hexdigest() == before
    con = sqlite3.connect(root / "ledger.sqlite3")
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["app"]
    con.close()


def test_an_empty_ledger_file_and_a_new_directory_still_open(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "ledger.sqlite3").write_bytes(b"")
    for root in (tmp_path / "a", tmp_path / "b"):
        with _open(root, vector_store="faiss") as fl:
            fl.add_texts(TEXTS)
        with _open(root) as fl:
            assert fl.count()["documents"] == 2


# ---------------------------------------------------------------------------------------------------
# The storage layer itself
# ---------------------------------------------------------------------------------------------------
def test_storage_refuses_links_in_any_component_and_writes_atomically(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "root"
    store = Storage(root)
    root.mkdir()
    info = store.write_bytes("sub/file.bin", b"abc")
    assert (root / "sub" / "file.bin").read_bytes() == b"abc" and info["bytes"] == 3
    assert store.read_bytes("sub/file.bin") == b"abc"
    assert sorted(os.listdir(root / "sub")) == ["file.bin"]  # no temp file left
    (root / "dir-link").symlink_to(outside / "folder", target_is_directory=True)
    (root / "file-link").symlink_to(outside / "notes.txt")
    before = _tree(outside)
    for name in ("dir-link/keep.txt", "file-link", "dir-link/new"):
        with pytest.raises(UnsafePathError, match=name.split("/")[0]):
            store.write_bytes(name, b"x")
        with pytest.raises(UnsafePathError):
            store.read_bytes(name)
        with pytest.raises(UnsafePathError):
            store.path(name)
    with pytest.raises(UnsafePathError):
        store.mkdir("dir-link")
    for bad in ("../x", "/etc/passwd", "a//b", ""):
        with pytest.raises(UnsafePathError):
            store.path(bad)
    assert _tree(outside) == before


# ---------------------------------------------------------------------------------------------------
# Every file of every backend, as a hard link or a symbolic link to an outside copy of itself
# ---------------------------------------------------------------------------------------------------
def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.mark.parametrize("link", ["hard", "symbolic"])
@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_link_at_any_file_never_writes_outside(
    templates: dict[str, Path], tmp_path: Path, kind: str, link: str
) -> None:
    names = _files(templates[kind])
    assert any("data_level0.bin" in n for n in names) or kind != "chroma", names
    outcomes: dict[str, str] = {}
    for i, name in enumerate(names):
        root = tmp_path / str(i) / "index"
        shutil.copytree(templates[kind], root, symlinks=True)
        outside = tmp_path / str(i) / "outside"
        outside.mkdir()
        target = outside / Path(name).name
        shutil.copyfile(root / name, target)  # the outside file holds the very bytes: nothing looks damaged
        (root / name).unlink()
        if link == "hard":
            os.link(target, root / name)
        else:
            (root / name).symlink_to(target)
        before = _tree(outside)
        try:
            with _open(root) as fl:
                fl.search("glaciers", k=2)
                fl.search("glaciers", k=2, search_mode="vector")
                fl.add_texts(["Deserts are dry."])
                hit = fl.search("Deserts are dry.", k=1, search_mode="vector")[0]
                assert hit.content == "Deserts are dry."
        except UnsafePathError as exc:
            assert str(root / name) in str(exc), (name, exc)
            outcomes[name] = "refused"
        except Exception as exc:  # noqa: BLE001 - counted: any other failure is one too
            outcomes[name] = f"failed: {type(exc).__name__}: {exc}"
        else:
            outcomes[name] = "rebuilt" if list(root.glob("*.corrupt-*")) else "opened"
        if _tree(outside) != before:
            outcomes[name] += ", wrote outside"
    # a file read by a library or written in place is refused or moved aside: never used through the link
    bad = {name: how for name, how in outcomes.items() if how not in ("refused", "rebuilt")}
    assert not bad, f"{len(bad)} of {len(names)} {link} links: {bad}"
