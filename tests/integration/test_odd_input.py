"""Odd input from the issue tracker: undecodable file names, NUL bytes and lone surrogates, bad arguments,
a remove that fails half-way, unreadable directories under ``prune=True`` and symlinks out of the folder."""

from __future__ import annotations

import errno
import logging
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.document_loader import DocumentLoader
from finderledge.errors import ConfigurationError, DocumentNotFoundError, LoadError, SourceNotFoundError
from finderledge.keyword_store import KeywordStore

LATIN1_NAME = b"latin1_\xe9t\xe9.txt"


def _write_bytes_name(folder: Path, name: bytes, content: bytes) -> str:
    """Create a file whose name is not valid UTF-8; returns its path as Python sees it (surrogateescape)."""
    path = os.path.join(os.fsencode(folder), name)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.write(fd, content)
    finally:
        os.close(fd)
    return os.fsdecode(path)


def _parents(results: Any) -> set[str]:
    return {r.metadata["_finderledge"]["parent_id"] for r in results}


def _consistent(fl: FinderLedge) -> set[str]:
    ledger_ids = {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
    assert ledger_ids == fl.vector_store.ids() == fl.keyword_store.ids()
    return ledger_ids


# -- 1. a file name that is not UTF-8 ---------------------------------------------------------------------
def test_non_utf8_file_name_is_ingested_and_does_not_fail_the_folder(
    tmp_path: Path, minilm, store_kind: str
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The warehouse stores bicycles and helmets.", encoding="utf-8")
    odd = _write_bytes_name(folder, LATIN1_NAME, b"A latin-1 named note about cheese and red wine.")
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, vector_store=store_kind, show_progress=False)
    report = fl.ingest(folder)
    assert report.skipped == [] and report.files_added == 2
    sources = fl.list_sources()
    assert len(sources) == 2
    odd_source = next(s for s in sources if "latin1_" in s)
    odd_source.encode("utf-8")  # stored as a safe string
    assert "\\xe9" in odd_source
    for mode in ("keyword", "vector", "hybrid"):
        top = fl.search("cheese and red wine", search_mode=mode, k=1)[0]
        assert top.metadata["source"] == odd_source
        top.metadata["file_name"].encode("utf-8")
    assert "latin1_" in fl.get_context("cheese and red wine", k=1)
    again = fl.ingest(folder, prune=True)  # the safe name maps back to the file: unchanged, not pruned
    assert (again.files_unchanged, again.added, again.pruned, again.skipped) == (2, [], [], [])
    _consistent(fl)
    single = fl.ingest(Path(odd))  # the file given on its own is the same source
    assert single.files_unchanged == 1 and single.added == []
    assert len(fl.list_documents(source=odd)) == 1  # the real path finds the stored safe one
    assert fl.remove_document(odd)  # by its real path (surrogate-escaped str)
    assert fl.list_sources() == [str(folder / "a.txt")]
    _consistent(fl)
    fl.close()


def test_loader_names_undecodable_files_with_safe_strings(tmp_path: Path) -> None:
    _write_bytes_name(tmp_path, LATIN1_NAME, b"text")
    _write_bytes_name(tmp_path, b"bad_\xff.png", b"\x89PNG\x00\x00")
    result = DocumentLoader().load(tmp_path)
    assert [Path(p).name for p in result.files] == ["latin1_\\xe9t\\xe9.txt"]
    doc = result.documents[0]
    assert doc.metadata["file_name"] == "latin1_\\xe9t\\xe9.txt" == doc.metadata["source_id"]
    assert [Path(s.path).name for s in result.skipped] == ["bad_\\xff.png"]


# -- 2. NUL bytes and lone surrogates -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def texts(minilm) -> Iterator[FinderLedge]:  # type: ignore[no-untyped-def]
    """An in-memory ledger with a few raw texts (searches only)."""
    fl = FinderLedge(embedding=minilm, show_progress=False)
    fl.add_texts(
        [
            "Bicycles are stored in the north warehouse next to the helmets.",
            "Refunds are processed within ten business days of the request.",
            "Password reset links expire after thirty minutes.",
            "The zebra enclosure is cleaned every morning at dawn.",
        ]
    )
    yield fl
    fl.close()


def test_text_with_a_nul_byte_is_text_never_a_path(tmp_path: Path, minilm, store_kind: str) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, vector_store=store_kind, show_progress=False)
    for not_a_path in ("notes.txt\x00", "a\x00b", "dir/file\x00.md"):
        with pytest.raises(SourceNotFoundError, match="add_texts"):
            fl.add_document(not_a_path)
    text = "Kangaroo\x00 statistics for the southern reserve."
    (pid,) = fl.add_texts([text])
    assert fl.get_document(pid).page_content == text
    assert fl.add_texts([text]) == [pid]  # stored once
    for mode in ("keyword", "vector", "hybrid"):
        assert pid in _parents(fl.search("kangaroo statistics reserve", search_mode=mode, k=1))
    _consistent(fl)
    fl.close()
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)  # and after reopening
    assert fl.get_document(pid).page_content == text
    assert pid in _parents(fl.search("kangaroo\x00 reserve", k=1))
    fl.close()


def test_lone_surrogates_in_text_are_replaced_with_a_warning(
    minilm, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(embedding=minilm, show_progress=False)
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        (pid,) = fl.add_texts(["a\ud800b lemurs climb trees"])
    assert fl.get_document(pid).page_content == "a\ufffdb lemurs climb trees"
    assert any("surrogate" in r.getMessage() for r in caplog.records)
    assert fl.add_texts(["a\udfffb lemurs climb trees"]) == [pid]  # the same text once cleaned
    (doc_pid,) = fl.add_document(Document(page_content="pandas \udc80 eat bamboo", metadata={"zoo": "x"}))
    assert fl.get_document(doc_pid).page_content == "pandas \ufffd eat bamboo"
    (pair,) = fl.add_texts(["smile \ud83d\ude00 please"])  # a surrogate pair is one character
    assert fl.get_document(pair).page_content == "smile \U0001f600 please"
    assert pid in _parents(fl.search("lemurs climb", search_mode="keyword", k=1))
    fl.close()


@pytest.mark.parametrize("mode", ["hybrid", "vector", "keyword"])
def test_a_query_with_a_lone_surrogate_searches_fine(texts: FinderLedge, mode: str) -> None:
    results = texts.search("zebra \ud800enclosure", search_mode=mode, k=2)
    assert "zebra" in results[0].content
    assert "zebra" in texts.get_context("zebra\udcff enclosure", search_mode=mode, k=1)
    assert isinstance(texts.search("\ud800", search_mode=mode), list)  # only a replacement character left


def test_a_json_file_with_an_escaped_lone_surrogate_does_not_fail_the_folder(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "odd.json").write_text(
        '{"title": "broken \\ud800 title", "body": "giraffes"}', encoding="utf-8"
    )
    (folder / "fine.txt").write_text("Ostriches run fast.", encoding="utf-8")
    fl = FinderLedge(embedding=minilm, show_progress=False)
    report = fl.ingest(folder)
    assert report.files_added == 2 and report.skipped == []
    assert "\ufffd" in fl.list_documents(source=str(folder / "odd.json"))[0].page_content
    fl.close()


# -- 3. argument validation -------------------------------------------------------------------------------
BAD_SEARCH_ARGS = [
    ("k", -1),
    ("k", 0),
    ("k", 1.5),
    ("k", True),
    ("k", "3"),
    ("candidate_k", -5),
    ("candidate_k", 0),
    ("candidate_k", 2.0),
    ("search_mode", "fuzzy"),
    ("search_mode", 3),
    ("return_parents", "yes"),
    ("return_parents", None),
    ("rerank", "no"),
    ("filter", "lang"),
    ("filter", {"$bogus": 1}),
]


@pytest.mark.parametrize("return_parents", [False, True])
@pytest.mark.parametrize(("name", "value"), BAD_SEARCH_ARGS)
def test_search_refuses_bad_arguments_naming_them(
    texts: FinderLedge, name: str, value: Any, return_parents: bool
) -> None:
    kwargs: dict[str, Any] = {"return_parents": return_parents, name: value}
    with pytest.raises(ConfigurationError, match=name):
        texts.search("bicycles", **kwargs)
    with pytest.raises(ConfigurationError, match=name):
        texts.as_retriever(**{name: value})
    if name not in ("candidate_k", "rerank"):
        with pytest.raises(ConfigurationError, match=name):
            texts.get_context("bicycles", **kwargs)


@pytest.mark.parametrize("query", [None, b"bicycles", 3, ["bicycles"]])
def test_search_refuses_a_query_that_is_not_text(texts: FinderLedge, query: Any) -> None:
    with pytest.raises(ConfigurationError, match="query"):
        texts.search(query)
    with pytest.raises(ConfigurationError, match="query"):
        texts.get_context(query)
    with pytest.raises(ConfigurationError, match="query"):
        texts.search(query, return_parents=True)


@pytest.mark.parametrize("max_chars", [0, -1, 2.5, "100", True])
def test_get_context_refuses_bad_max_chars(texts: FinderLedge, max_chars: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_chars"):
        texts.get_context("bicycles", max_chars=max_chars)
    assert texts.get_context("bicycles", max_chars=5)  # a small positive cap still gives something


def test_the_retriever_validates_per_call_options(texts: FinderLedge) -> None:
    retriever = texts.as_retriever(k=2)
    assert len(retriever.invoke("bicycles")) == 2
    with pytest.raises(ConfigurationError, match="k"):
        retriever.invoke("bicycles", k=0)


BAD_ADD_ARGS = [
    ("include", 3),
    ("include", [1]),
    ("exclude", [b"*.md"]),
    ("on_error", "ignore"),
    ("prune", "yes"),
    ("follow_symlinks", "no"),
    ("metadata", "lang=en"),
    ("metadata", [("lang", "en")]),
]


@pytest.mark.parametrize(("name", "value"), BAD_ADD_ARGS)
def test_add_refuses_bad_arguments_naming_them(
    tmp_path: Path, texts: FinderLedge, name: str, value: Any
) -> None:
    (tmp_path / "a.txt").write_text("hello", encoding="utf-8")
    before = texts.count()
    for call in (texts.add_document, texts.ingest, lambda s, **kw: texts.add_documents([s], **kw)):
        with pytest.raises(ConfigurationError, match=name):
            call(tmp_path, **{name: value})
    assert texts.count() == before


@pytest.mark.parametrize("sources", ["a.txt", Path("a.txt"), Document(page_content="x"), 3, None])
def test_add_documents_refuses_a_single_source(texts: FinderLedge, sources: Any) -> None:
    with pytest.raises(ConfigurationError, match="sources"):
        texts.add_documents(sources)


@pytest.mark.parametrize("source", [None, 3, b"bytes text", [Document(page_content="ok text"), 3]])
def test_add_document_refuses_a_source_of_another_type(texts: FinderLedge, source: Any) -> None:
    with pytest.raises(ConfigurationError, match="add_document"):
        texts.add_document(source)


@pytest.mark.parametrize("doc_id", ["", "   ", None, 3, b"abc"])
def test_remove_refuses_a_bad_id(texts: FinderLedge, doc_id: Any) -> None:
    with pytest.raises(ConfigurationError, match="doc_id"):
        texts.remove_document(doc_id)


def test_remove_of_an_unknown_odd_id_says_not_found(texts: FinderLedge) -> None:
    for doc_id in ("nope\x00", "nope\ud800", "no/such\udce9.txt"):
        with pytest.raises(DocumentNotFoundError):
            texts.remove_document(doc_id)


def test_close_is_idempotent(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)
    fl.add_texts(["Close me twice."])
    assert fl.close() is None
    assert fl.close() is None  # the second close is a no-op, not an error
    with FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False, lock_timeout=1) as again:
        assert again.count()["documents"] == 1  # nothing lost by closing twice
        again.add_texts(["Written after a double close: the write lock was released."])
        again.close()  # and __exit__ closes once more
    with FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False) as third:
        assert third.count()["documents"] == 2


@pytest.mark.parametrize(
    "name", ["vector_weight", "keyword_weight", "bm25_k1", "bm25_b", "min_vector_share", "lock_timeout"]
)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_float_settings_are_refused(
    name: str,
    value: float,
    minilm,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=name):
        FinderLedge(embedding=minilm, **{name: value})
    monkeypatch.setenv(f"FINDERLEDGE_{name.upper()}", str(value))
    with pytest.raises(ValueError, match=name):
        FinderLedge(embedding=minilm)


@pytest.mark.parametrize("name", ["k", "candidate_k", "chunk_size", "rrf_k", "embedding_batch_size"])
def test_non_finite_integer_settings_are_refused(name: str, minilm) -> None:  # type: ignore[no-untyped-def]
    for value in (math.nan, math.inf):
        with pytest.raises(ValueError, match=name):
            FinderLedge(embedding=minilm, **{name: value})


# -- 4. a remove whose index write fails ------------------------------------------------------------------
def _enospc(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("failing", ["keyword.flush", "vector.delete", "vector.flush"])  # what writes to disk
def test_a_failed_remove_is_all_or_nothing(
    tmp_path: Path,
    minilm,
    store_kind: str,
    failing: str,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    target = folder / "target.txt"
    target.write_text("Narwhals use their tusk to sense water temperature in the arctic.", encoding="utf-8")
    (folder / "other.txt").write_text(
        "Camels store fat in their humps for long desert trips.", encoding="utf-8"
    )
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, vector_store=store_kind, show_progress=False)
    fl.ingest(folder)
    pid = fl.list_documents(source=str(target))[0].id
    query = "narwhal tusk water temperature arctic"

    def legs(ledger: FinderLedge) -> tuple[bool, bool, bool]:
        return (
            ledger.get_document(pid) is not None,
            pid in _parents(ledger.search(query, search_mode="keyword", k=5)),
            pid in _parents(ledger.search(query, search_mode="vector", k=5)),
        )

    assert legs(fl) == (True, True, True)
    leg, method = failing.split(".")
    owner = KeywordStore if leg == "keyword" else type(fl.vector_store)
    with monkeypatch.context() as patch:
        patch.setattr(owner, method, _enospc)
        try:
            fl.remove_document(target)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        state = legs(fl)
    assert state in ((True, True, True), (False, False, False)), state
    if state[0]:
        assert fl.remove_document(target) == [pid]  # the retry works
    else:
        with pytest.raises(DocumentNotFoundError):
            fl.remove_document(target)
    assert legs(fl) == (False, False, False)
    (sloth,) = fl.add_texts(["Sloths descend from trees once a week."])  # a later write still works
    for mode in ("keyword", "vector"):
        assert sloth in _parents(fl.search("sloths descend trees", search_mode=mode, k=1))
    fl.close()
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)
    assert legs(fl) == (False, False, False)
    assert fl.search("camels desert humps", k=1)[0].metadata["source"].endswith("other.txt")
    assert sloth in _parents(fl.search("sloths descend trees", search_mode="vector", k=1))
    fl.remove_document(sloth)  # a write after reopening checkpoints the indexes: every store agrees
    _consistent(fl)
    fl.close()


def test_a_failed_remove_then_reopen_before_any_retry(
    tmp_path: Path,
    minilm,
    store_kind: str,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, vector_store=store_kind, show_progress=False)
    (pid,) = fl.add_texts(["Axolotls regrow lost limbs within weeks."], metadata={"source": "axolotl"})
    with monkeypatch.context() as patch:
        patch.setattr(type(fl.vector_store), "delete", _enospc)
        patch.setattr(KeywordStore, "flush", _enospc)
        try:
            fl.remove_document(pid)
        except OSError:
            pass
        gone = fl.get_document(pid) is None
    fl.close()
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)
    for mode in ("keyword", "vector"):
        assert (pid in _parents(fl.search("axolotl regrow limbs", search_mode=mode, k=3))) is not gone
    _consistent(fl)
    fl.close()


# -- 5. prune and an unreadable directory ----------------------------------------------------------------
def _make_unreadable(monkeypatch: pytest.MonkeyPatch, locked: Path) -> None:
    """What a non-root user sees for a ``chmod 000`` directory: it cannot be listed, nor its entries stat'ed."""
    prefix = str(locked)

    def denied(path: Any) -> bool:
        try:
            p = os.fsdecode(os.fspath(path))
        except TypeError:
            return False
        return p == prefix or p.startswith(prefix + os.sep)

    def guard(real: Any, below_only: bool = False) -> Any:
        def wrapper(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
            if denied(path) and not (below_only and os.fsdecode(os.fspath(path)) == prefix):
                raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
            return real(path, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(os, "scandir", guard(os.scandir))
    monkeypatch.setattr(os, "listdir", guard(os.listdir))
    monkeypatch.setattr(os, "stat", guard(os.stat, below_only=True))  # the directory itself can be stat'ed
    monkeypatch.setattr(os, "lstat", guard(os.lstat, below_only=True))
    real_iterdir = Path.iterdir

    def iterdir(self: Path) -> Any:
        if denied(self):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)


def _prune_folder(tmp_path: Path) -> tuple[Path, Path]:
    folder = tmp_path / "docs"
    (folder / "open").mkdir(parents=True)
    (folder / "locked").mkdir()
    (folder / "open" / "a.txt").write_text("Otters hold hands while sleeping.", encoding="utf-8")
    (folder / "open" / "gone.txt").write_text("Flamingos are pink from their diet.", encoding="utf-8")
    (folder / "locked" / "b.txt").write_text("Octopuses have three hearts.", encoding="utf-8")
    return folder, folder / "locked"


def test_prune_keeps_documents_of_an_unreadable_directory(
    tmp_path: Path,
    minilm,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, locked = _prune_folder(tmp_path)
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)
    assert fl.ingest(folder).files_added == 3
    (folder / "open" / "gone.txt").unlink()
    with monkeypatch.context() as patch:
        _make_unreadable(patch, locked)
        report = fl.ingest(folder, prune=True)
    assert len(report.pruned) == 1  # gone.txt is known to be gone
    names = {Path(s).name for s in fl.list_sources()}
    assert names == {"a.txt", "b.txt"}
    skipped = dict(report.skipped)
    assert str(locked) in skipped and "permission denied" in skipped[str(locked)].lower()
    assert "octopuses" in fl.search("how many hearts does an octopus have", k=1)[0].content.lower()
    _consistent(fl)
    fl.close()


def test_unreadable_directory_raises_with_on_error_raise(
    tmp_path: Path,
    minilm,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder, locked = _prune_folder(tmp_path)
    fl = FinderLedge(embedding=minilm, show_progress=False)
    with monkeypatch.context() as patch:
        _make_unreadable(patch, locked)
        with pytest.raises(LoadError, match="locked"):
            fl.ingest(folder, on_error="raise")
    assert fl.count()["documents"] == 0
    fl.close()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX permissions")
def test_prune_keeps_documents_of_a_chmod_000_directory(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder, locked = _prune_folder(tmp_path)
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, show_progress=False)
    fl.ingest(folder)
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):
            pytest.skip("this user (root) can read a chmod 000 directory; the monkeypatched test covers it")
        report = fl.ingest(folder, prune=True)
        assert report.pruned == [] and str(locked) in dict(report.skipped)
        assert {Path(s).name for s in fl.list_sources()} == {"a.txt", "b.txt", "gone.txt"}
    finally:
        locked.chmod(stat.S_IRWXU)
        fl.close()


# -- 6. symlinks ------------------------------------------------------------------------------------------
def _symlink_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "a.txt").write_text("Hedgehogs roll into a ball when scared.", encoding="utf-8")
    (root / "sub" / "c.txt").write_text("Penguins huddle together for warmth.", encoding="utf-8")
    (outside / "secret.txt").write_text("The vault combination is seven seven three.", encoding="utf-8")
    try:
        os.symlink(outside / "secret.txt", root / "link.txt")  # file outside
        os.symlink(outside, root / "linkdir")  # directory outside
        os.symlink(root / "a.txt", root / "inner.txt")  # file inside
        os.symlink(root / "sub", root / "sublink")  # directory inside
        os.symlink(tmp_path / "missing.txt", root / "dangling.txt")
    except OSError:
        pytest.skip("symlinks not permitted")
    return root, outside


def test_symlinks_out_of_the_folder_are_not_followed_by_default(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    root, _ = _symlink_tree(tmp_path)
    fl = FinderLedge(embedding=minilm, show_progress=False)
    report = fl.ingest(root)
    assert sorted(os.path.relpath(s, root) for s in fl.list_sources()) == [
        "a.txt",
        os.path.join("sub", "c.txt"),
    ]
    skipped = {os.path.relpath(p, root): reason for p, reason in report.skipped}
    for name in ("link.txt", "linkdir"):
        assert (
            "symlink" in skipped[name] and "outside" in skipped[name] and "follow_symlinks" in skipped[name]
        )
    assert "vault" not in fl.get_context("vault combination", k=5).lower()
    assert len(_parents(fl.search("hedgehogs roll into a ball", k=10, search_mode="keyword"))) == 1
    fl.close()


def test_symlinks_are_followed_when_asked_without_duplicates(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    root, _ = _symlink_tree(tmp_path)
    fl = FinderLedge(embedding=minilm, show_progress=False)
    fl.ingest(root, follow_symlinks=True)
    assert "vault" in fl.search("vault combination", k=1)[0].content
    for query in ("hedgehogs roll into a ball", "penguins huddle warmth", "vault combination seven"):
        hits = fl.search(query, k=10, search_mode="keyword")
        assert len({h.content for h in hits}) == len(hits) == 1, query  # each real file once
    assert fl.add_document(root / "link.txt")  # a symlinked file named on its own is read
    fl.close()


def test_loader_does_not_follow_symlinks_by_default(tmp_path: Path) -> None:
    root, _ = _symlink_tree(tmp_path)
    default = DocumentLoader().load(root)
    assert sorted(os.path.relpath(p, root) for p in default.files) == ["a.txt", os.path.join("sub", "c.txt")]
    followed = DocumentLoader(follow_symlinks=True).load(root)
    assert len(followed.files) == 3


def test_cli_add_reports_symlinks_and_follows_them_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from finderledge.cli.commands import main

    root, _ = _symlink_tree(tmp_path)
    d = str(tmp_path / "idx")
    assert main(["add", str(root), "-d", d, "--no-progress", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["added"]) == 2 and any("link.txt" in path for path, _ in report["skipped"])
    assert main(["add", str(root), "-d", d, "--no-progress", "--follow-symlinks", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["added"]) == 1  # the file outside, read through link.txt
