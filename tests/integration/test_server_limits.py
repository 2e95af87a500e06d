"""What an upload unpacks to is limited while it is read (issue 28: a 0.4 MB DOCX unpacking to 150 MB killed a
worker; a 1.7 MB CSV of 200,000 rows held one for 14 minutes; each left an orphan file).  Real files against a
real ``finderledge serve`` with 2 workers: each is refused at once with a 413 naming the limit and the option
that raises it, the workers stay up, nothing is left in server/uploads."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
from hostile_files import big_csv, zip_bomb_docx
from server_process import running_server


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


def long_text(paragraphs: int) -> bytes:
    """Markdown of ``paragraphs`` paragraphs of about 1,000 characters (about a chunk each)."""
    return "\n\n".join(
        f"Paragraph {i} on subject {i % 13}. " + "the ledger records every entry in order " * 24
        for i in range(paragraphs)
    ).encode()


def test_an_upload_splitting_into_too_many_chunks_is_refused_while_splitting(tmp_path: Path) -> None:
    """4,000 chunks against ``--max-chunks 50``: a 413 naming the limit and the option, found while splitting
    (embedding 4,000 chunks takes far longer than the answer does), no orphan, the worker still serving."""
    directory = tmp_path / "index"
    with (
        running_server(
            directory,
            workers=1,
            args=["--max-chunks", "50", "--index-wait", "60"],
            log=tmp_path / "server.log",
        ) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        started = time.monotonic()
        r = client.post("/api/v1/documents", files={"file": ("long.md", long_text(4000), "text/markdown")})
        took = time.monotonic() - started
        assert r.status_code == 413, r.text
        detail = r.json()["detail"]
        assert "max_chunks" in detail and "--max-chunks" in detail and "limit of 50" in detail, detail
        assert took < 30, f"refused after {took:.1f} s"
        small = client.post("/api/v1/documents", files={"file": ("short.md", long_text(5), "text/markdown")})
        assert small.status_code == 201 and small.json()["status"] == "indexed", small.text
        assert 0 < small.json()["chunk_count"] <= 50
        stored = _files(directory / "server" / "uploads")
        assert len(stored) == 1 and stored[0].endswith("short.md")  # no orphan of the refused upload
