"""Hostile uploads of issue 28 (a zip-bomb DOCX, a 200,000-row CSV, a 100-page PDF) and an oversized filter,
built as real files, for the server's limit tests and the hostile-mix load run (benchmarks/bench_server_load.py)."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

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
    """A CSV of ``rows`` short records (200,000: about 1.7 MB, as in the issue)."""
    return ("id,item\n" + "".join(f"{i},x{i % 97}\n" for i in range(rows))).encode()


def many_page_pdf(path: Path, pages: int = 100) -> Path:
    """A real PDF (reportlab) of ``pages`` pages, a line of text on each."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for i in range(pages):
        c.drawString(72, 720, f"Page {i + 1} of the quarterly inventory report: warehouse shelf {i % 17}.")
        c.drawString(72, 700, "Stock levels, shipping schedule and refunds are listed below.")
        c.showPage()
    c.save()
    return path


def huge_filter_body(values: int = 50_000) -> bytes:
    """A search body whose filter lists ``values`` file names in one ``$in`` (about 0.6 MB)."""
    names = [f"file-{i:06d}.md" for i in range(values)]
    return json.dumps({"query": "refund", "filter": {"filename": {"$in": names}}}).encode()


def write_hostile_files(folder: Path) -> dict[str, Path]:
    """The hostile mix's files under ``folder``: name -> path."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {
        "bomb.docx": folder / "bomb.docx",
        "rows.csv": folder / "rows.csv",
        "report.pdf": folder / "report.pdf",
        "filter.json": folder / "filter.json",
    }
    out["bomb.docx"].write_bytes(zip_bomb_docx())
    out["rows.csv"].write_bytes(big_csv())
    many_page_pdf(out["report.pdf"])
    out["filter.json"].write_bytes(huge_filter_body())
    return out
