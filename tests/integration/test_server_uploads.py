"""Hostile uploads: each gets a clear 4xx, nothing is written outside the upload area, the index is unchanged."""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from files import make_docx

from finderledge import FinderLedge
from finderledge.server import ServerConfig, create_app


@pytest.fixture(scope="module")
def hostile(
    tmp_path_factory: pytest.TempPathFactory, minilm
) -> Iterator[tuple[TestClient, FinderLedge, Path]]:
    root = tmp_path_factory.mktemp("hostile")
    fl = FinderLedge(root / "index", embedding=minilm, show_progress=False)
    fl.add_texts(["A document that was there before the attacks."])
    # the write's background calibration writes calibration.lock; it must be done before the tests' "before"
    assert fl.wait_for_calibration(timeout=120)
    config = ServerConfig(directory=root / "index", max_upload_mb=1, max_unpacked_mb=4)
    with TestClient(create_app(config, ledger=fl)) as client:
        yield client, fl, root
    fl.close()


def _files(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def _zip_bomb() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("word/document.xml", "<w:document/>")
        zf.writestr("word/media/zeros.bin", b"\0" * (16 * 1024 * 1024))  # 16 MiB unpacked, ~16 KiB packed
    return buf.getvalue()


HOSTILE = [
    ("../../outside.txt", b"path traversal", "text/plain", 400, "path"),
    ("..\\..\\outside.txt", b"path traversal", "text/plain", 400, "path"),
    ("/etc/cron.d/x.txt", b"absolute path", "text/plain", 400, "path"),
    ("sub/../../x.md", b"# nested traversal", "text/markdown", 400, "path"),
    (".hidden.txt", b"hidden file", "text/plain", 400, "hidden"),
    ("..", b"dots", "text/plain", 400, "file name"),
    ("malware.exe", b"MZ\x90\x00\x03", "application/octet-stream", 400, "unsupported type '.exe'"),
    ("noextension", b"text", "text/plain", 400, "unsupported type"),
    ("report.pdf", b"%PDF-1.4 but declared as an image", "image/png", 415, "declared type 'image/png'"),
    ("notes.txt", b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff", "text/plain", 400, "binary content"),
    ("fake.pdf", b"just text pretending to be a PDF", "application/pdf", 400, "not a PDF"),
    (
        "corrupt.pdf",
        b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\ngarbage\n%%EOF",
        "application/pdf",
        400,
        "could not be read",
    ),
    ("fake.docx", b"PK but not really a zip", "application/octet-stream", 400, "not a DOCX"),
    ("bomb.docx", _zip_bomb(), "application/octet-stream", 413, "max_unpacked_mb"),
    ("empty.txt", b"", "text/plain", 400, "empty"),
    ("blank.md", b"   \n\n  ", "text/markdown", 400, "empty"),
]


@pytest.mark.parametrize("name, data, mime, status, says", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_upload_is_refused_and_changes_nothing(
    hostile, name: str, data: bytes, mime: str, status: int, says: str
) -> None:
    client, fl, root = hostile
    before_files, before_count = _files(root), fl.count()
    r = client.post("/api/v1/documents", files={"file": (name, data, mime)})
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    assert says in detail and "Traceback" not in detail and str(root) not in detail
    assert fl.count() == before_count
    assert _files(root) == before_files  # nothing written anywhere (the upload area keeps no leftovers)


def _raw_upload(client: TestClient, filename: bytes, data: bytes):
    """A multipart body written by hand (HTTP clients escape what an attacker would not)."""
    boundary = b"xyzzy"
    body = (
        b"--"
        + boundary
        + b'\r\nContent-Disposition: form-data; name="file"; filename="'
        + filename
        + b'"\r\nContent-Type: text/plain\r\n\r\n'
        + data
        + b"\r\n--"
        + boundary
        + b"--\r\n"
    )
    return client.post(
        "/api/v1/documents", content=body, headers={"Content-Type": "multipart/form-data; boundary=xyzzy"}
    )


@pytest.mark.parametrize("filename", [b"nul\x00.txt", b"tab\t.txt", b"bell\x07.md", b"../x.txt"])
def test_raw_hostile_file_names(hostile, filename: bytes) -> None:
    client, fl, root = hostile
    before_files, before_count = _files(root), fl.count()
    r = _raw_upload(client, filename, b"some text")
    assert r.status_code == 400, r.text
    assert fl.count() == before_count and _files(root) == before_files


def test_too_large_is_413_by_length_and_while_streaming(hostile) -> None:
    client, fl, root = hostile
    before_files, before_count = _files(root), fl.count()
    big = b"a" * (1024 * 1024 + 1)
    assert client.post("/api/v1/documents", files={"file": ("big.txt", big, "text/plain")}).status_code == 413
    boundary = "xyzzy"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n'
            f"Content-Type: text/plain\r\n\r\n"
        ).encode()
        + big * 2
        + f"\r\n--{boundary}--\r\n".encode()
    )

    def chunked() -> Iterator[bytes]:  # no Content-Length: counted while it arrives
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    r = client.post(
        "/api/v1/documents",
        content=chunked(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert r.status_code == 413 and "limit" in r.json()["detail"]
    assert fl.count() == before_count and _files(root) == before_files


def test_a_real_docx_and_a_unicode_name_are_accepted(hostile, tmp_path: Path) -> None:
    client, _fl, root = hostile
    docx = make_docx(tmp_path / "report.docx").read_bytes()
    r = client.post(
        "/api/v1/documents", files={"file": ("報告書 2024.docx", docx, "application/octet-stream")}
    )
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["filename"] == "報告書 2024.docx" and doc["chunk_count"] >= 1
    stored = root / "index" / "server" / "uploads" / doc["id"] / "報告書 2024.docx"
    assert stored.read_bytes() == docx
    assert client.delete(f"/api/v1/documents/{doc['id']}").status_code == 204
    assert not stored.parent.exists()
