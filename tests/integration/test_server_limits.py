"""What an upload unpacks to is limited while it is read (issue 28: a 0.4 MB DOCX unpacking to 150 MB killed a
worker; a 1.7 MB CSV of 200,000 rows held one for 14 minutes; each left an orphan file).  Real files against a
real ``finderledge serve`` with 2 workers: each is refused at once with a 413 naming the limit and the option
that raises it, the workers stay up, nothing is left in server/uploads."""

from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import httpx
from server_process import running_server

DOCX_HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
)
CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
    'content-types"><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/'
    'document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.'
    'main+xml"/></Types>'
)


def zip_bomb_docx(unpacked_mb: int = 150) -> bytes:
    """A well-formed DOCX whose document.xml is ``unpacked_mb`` MB of paragraphs (a few hundred KB packed)."""
    para = "<w:p><w:r><w:t>" + "lorem ipsum dolor sit amet " * 20 + "</w:t></w:r></w:p>"
    block = (para * (1024 * 1024 // len(para) + 1)).encode()[: 1024 * 1024]
    block = block[: block.rindex(b"</w:p>") + len(b"</w:p>")]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.writestr("[Content_Types].xml", CONTENT_TYPES)
        with zf.open("word/document.xml", "w", force_zip64=True) as out:
            out.write(DOCX_HEAD.encode())
            for _ in range(unpacked_mb):
                out.write(block)
            out.write(b"</w:body></w:document>")
    return buf.getvalue()


def big_csv(rows: int = 200_000) -> bytes:
    return ("id,item\n" + "".join(f"{i},x{i % 97}\n" for i in range(rows))).encode()


def _files(folder: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs]


def test_unpacking_limits_refuse_at_once_on_a_real_server(tmp_path: Path) -> None:
    bomb, table = zip_bomb_docx(), big_csv()
    assert len(bomb) < 1_000_000 and 1_500_000 < len(table) < 2_500_000  # about the files
    directory = tmp_path / "index"
    with (
        running_server(directory, workers=2, log=tmp_path / "server.log") as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        for name, data, setting in (("bomb.docx", bomb, "max_unpacked_mb"), ("rows.csv", table, "max_rows")):
            started = time.monotonic()
            r = client.post("/api/v1/documents", files={"file": (name, data, "application/octet-stream")})
            took = time.monotonic() - started
            assert r.status_code == 413, r.text
            detail = r.json()["detail"]
            assert setting in detail and f"--{setting.replace('_', '-')}" in detail and "limit of" in detail
            assert took < 10, f"{name}: refused after {took:.1f} s"
        small = client.post("/api/v1/documents", files={"file": ("ok.csv", big_csv(50), "text/csv")})
        assert small.status_code == 201, small.text  # the workers are still serving
        assert client.get("/api/v1/health").status_code == 200
        stored = _files(directory / "server" / "uploads")
        assert len(stored) == 1 and stored[0].endswith("ok.csv")  # no orphan of a refused upload


def test_a_raised_limit_lets_the_rows_through(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    with (
        running_server(directory, workers=1, args=["--max-rows", "300"], log=tmp_path / "server.log") as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        r = client.post("/api/v1/documents", files={"file": ("rows.csv", big_csv(299), "text/csv")})
        assert r.status_code == 201, r.text
        r = client.post("/api/v1/documents", files={"file": ("rows.csv", big_csv(301), "text/csv")})
        assert r.status_code == 413 and "limit of 300" in r.json()["detail"]
