"""The access policy (issue 39) in Python: a scoped view is read-only unless made writable; a writable one
stamps its scope on what it stores and never replaces or removes another scope's document, whatever id,
``document_id`` or source it names; files only under its folders, links leading out refused, within the size
limit.  The MCP server over stdio is tests/integration/test_mcp.py; HTTP, test_server_tenants.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import (
    AccessDeniedError,
    AccessPolicy,
    ConfigurationError,
    DocumentNotFoundError,
    FinderLedge,
)

B_TEXT = "Contract seven: tenant B pays 1,000 EUR a month."


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    ledger = FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=8), show_progress=False, env_file=None
    )
    ledger.add_texts([B_TEXT], [{"tenant": "b"}], document_id="contract-7")
    ledger.add_texts(["Tenant B's note."], [{"tenant": "b"}], ids=["note-b"])
    yield ledger
    ledger.close()


def _b_documents(fl: FinderLedge) -> list[tuple[str, str]]:
    return sorted(
        (d.page_content, str(d.metadata["tenant"])) for d in fl.list_documents(filter={"tenant": "b"})
    )


def test_a_scope_is_read_only_unless_made_writable(fl: FinderLedge, tmp_path: Path) -> None:
    view = fl.scoped({"tenant": "a"})
    assert not view.writable and view.policy.base_filter == {"tenant": "a"}
    for write in (
        lambda: view.add_texts(["A's text"]),
        lambda: view.add_document(Document(page_content="A's doc")),
        lambda: view.remove_document("contract-7"),
        lambda: view.delete(["note-b"]),
    ):
        with pytest.raises(AccessDeniedError, match="read-only.*writable=True"):
            write()
    assert fl.count()["documents"] == 2


def test_a_scoped_writer_stamps_its_scope(fl: FinderLedge) -> None:
    view = fl.scoped({"tenant": "a"}, writable=True)
    ids = view.add_texts(["A's refund policy."], [{"tenant": "b", "kind": "faq"}])
    view.add_document(Document(page_content="A's travel policy.", metadata={"tenant": "b"}))
    stored = fl.list_documents(filter={"tenant": "a"})
    assert len(stored) == 2 and ids[0] in {d.id for d in stored}
    assert [r.content for r in view.search("refund policy", k=5)] and all(
        r.metadata["tenant"] == "a" for r in view.search("policy", k=5)
    )
    assert view.count()["documents"] == 2 and len(view.list_documents()) == 2


@pytest.mark.parametrize(
    "attack",
    [
        lambda v: v.add_texts(["Overwritten by A."], document_id="contract-7"),
        lambda v: v.add_texts(["Overwritten by A."], ids=["note-b"]),
        lambda v: v.add_document(Document(page_content="Overwritten by A.", id="note-b")),
        lambda v: v.add_document(Document(page_content="Overwritten by A."), document_id="contract-7"),
    ],
    ids=["document_id", "add_texts-id", "Document-id", "add_document-document_id"],
)
def test_a_scoped_writer_never_replaces_another_scopes_document(fl: FinderLedge, attack) -> None:
    before = _b_documents(fl)
    with pytest.raises(AccessDeniedError, match="outside this scope") as err:
        attack(fl.scoped({"tenant": "a"}, writable=True))
    assert "1,000 EUR" not in str(err.value) and "note." not in str(err.value)  # nothing of B's is shown
    assert _b_documents(fl) == before and fl.count()["documents"] == 2  # nothing written at all


def test_a_scoped_writer_never_removes_another_scopes_document(fl: FinderLedge) -> None:
    view = fl.scoped({"tenant": "a"}, writable=True)
    own = view.add_texts(["A's note."], ids=["note-a"])
    b_ids = [d.id for d in fl.list_documents(filter={"tenant": "b"})]
    assert view.delete([*b_ids, *own]) == own  # B's ids are ignored, as unknown ones are
    for key in ("contract-7", "note-b"):
        with pytest.raises(DocumentNotFoundError, match="in this scope"):
            view.remove_document(key)
    assert len(_b_documents(fl)) == 2


def test_another_scopes_copy_of_a_file_is_left_alone(fl: FinderLedge, tmp_path: Path) -> None:
    path = tmp_path / "policy.md"
    path.write_text("Version for B.", encoding="utf-8")
    fl.scoped({"tenant": "b"}, writable=True).add_document(path)
    path.write_text("Version for A.", encoding="utf-8")
    fl.scoped({"tenant": "a"}, writable=True).add_document(path)  # same path: B's copy is not replaced
    by_tenant = {d.metadata["tenant"]: d.page_content for d in fl.list_documents(source=str(path))}
    assert by_tenant == {"a": "Version for A.", "b": "Version for B."}


def test_a_scope_that_cannot_be_stamped_cannot_write(fl: FinderLedge) -> None:
    view = fl.scoped({"tenant": {"$in": ["a", "b"]}}, writable=True)
    with pytest.raises(AccessDeniedError, match="cannot be stamped"):
        view.add_texts(["x"])


def test_files_only_under_allowed_folders(fl: FinderLedge, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "ok.md").write_text("Gift cards never expire.", encoding="utf-8")
    (allowed / "big.md").write_text("x" * 500, encoding="utf-8")
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2", encoding="utf-8")
    (allowed / "link.md").symlink_to(secret)
    view = fl.scoped({"tenant": "a"}, writable=True, folders=[allowed], max_file_bytes=100)
    for path, reason in (
        (secret, "outside the allowed folders"),
        (allowed / ".." / "secret.txt", "outside the allowed folders"),
        (allowed / "link.md", "outside the allowed folders \\(through a symbolic link\\)"),
        (allowed / "big.md", "500 bytes, over .* limit of 100 bytes"),
        (allowed, "(link.md is a symbolic link leading outside|big.md is 500 bytes)"),
    ):
        with pytest.raises(AccessDeniedError, match=reason):
            view.add_document(path)
    with pytest.raises(AccessDeniedError, match="never follows symbolic links"):
        view.add_document(allowed / "ok.md", follow_symlinks=True)
    assert view.add_document(allowed / "ok.md")
    assert [d.page_content for d in view.list_documents()] == ["Gift cards never expire."]
    with pytest.raises(AccessDeniedError, match="no folder is allowed"):
        AccessPolicy({"tenant": "a"}, writable=True).check_path(allowed / "ok.md")
    with pytest.raises(ConfigurationError, match="expected an existing directory"):
        AccessPolicy(None, folders=[tmp_path / "missing"])


def test_the_policy_narrows_and_never_widens() -> None:
    policy = AccessPolicy({"tenant": "a"})
    assert policy.narrow(None) == {"tenant": "a"}
    assert policy.narrow({"tenant": "b"}) == {"$and": [{"tenant": "a"}, {"tenant": "b"}]}
    assert policy.accepts({"tenant": "a"}) and not policy.accepts({"tenant": "b"})
    assert AccessPolicy.owner().narrow({"x": 1}) == {"x": 1} and AccessPolicy.owner().writable


def test_a_scopes_clause_stays_outside_the_limit_through_its_retrievers(fl: FinderLedge) -> None:
    from finderledge.errors import FilterTooLargeError
    from finderledge.filters import MAX_FILTER_VALUES

    at_limit = {"n": {"$in": list(range(MAX_FILTER_VALUES))}}
    fl.add_texts(["A's budget note."], [{"tenant": "a", "n": 1}])
    view = fl.scoped({"tenant": "a"})
    assert [d.page_content for d in view.as_retriever().invoke("budget", filter=at_limit)] == [
        "A's budget note."
    ]
    assert [d.page_content for d in view.as_retriever(filter=at_limit).invoke("budget")] == [
        "A's budget note."
    ]
    with pytest.raises(FilterTooLargeError):  # the retriever's filter and the call's are both the caller's
        view.as_retriever(filter=at_limit).invoke("budget", filter={"n": 1})


def test_a_folder_link_leading_out_is_refused(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("hunter2", encoding="utf-8")
    (allowed / "sub" / "ok.md").write_text("fine", encoding="utf-8")
    (allowed / "sub" / "inside").symlink_to(
        allowed / "sub", target_is_directory=True
    )  # stays inside: skipped
    policy = AccessPolicy({"tenant": "a"}, writable=True, folders=[allowed])
    assert policy.check_path(allowed) == allowed.resolve()
    (allowed / "sub" / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(AccessDeniedError, match="out is a symbolic link leading outside the allowed folders"):
        policy.check_path(allowed)


def test_the_servers_unpack_limits_apply_to_files_of_the_host(tmp_path: Path) -> None:
    """The MCP server checks files with the HTTP server's upload limits: a zip-bomb DOCX, too many rows."""
    import functools
    import zipfile

    from finderledge.server.uploads import UnpackLimits, unpack_limit_problem

    with zipfile.ZipFile(tmp_path / "bomb.docx", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", b"\0" * (26 * 1024 * 1024))
    (tmp_path / "rows.csv").write_text("a,b\n" + "1,2\n" * 20, encoding="utf-8")
    (tmp_path / "fine.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    check = functools.partial(unpack_limit_problem, limits=UnpackLimits(rows=10))
    policy = AccessPolicy({"tenant": "a"}, writable=True, folders=[tmp_path], file_check=check)
    with pytest.raises(AccessDeniedError, match="bomb.docx: the DOCX unpacks to .* over the limit of 25 MB"):
        policy.check_path(tmp_path / "bomb.docx")
    with pytest.raises(AccessDeniedError, match="rows.csv: the file has more than 10 rows"):
        policy.check_path(tmp_path / "rows.csv")
    (tmp_path / "bomb.docx").unlink()
    (tmp_path / "rows.csv").unlink()
    assert policy.check_path(tmp_path) == tmp_path.resolve()


def test_a_hard_link_to_a_file_elsewhere_is_refused(tmp_path: Path) -> None:
    import os

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2", encoding="utf-8")
    os.link(secret, allowed / "notes.md")  # no link bit: only its second name tells
    policy = AccessPolicy({"tenant": "a"}, writable=True, folders=[allowed])
    for path in (allowed / "notes.md", allowed):
        with pytest.raises(AccessDeniedError, match="notes.md is a hard link"):
            policy.check_path(path)
