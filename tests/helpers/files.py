"""Builders of real test files (PDF with reportlab, DOCX with python-docx) shared by several layers."""

from __future__ import annotations

from pathlib import Path


def make_pdf(path: Path, pages: list[str | None]) -> Path:
    """Write a real PDF with reportlab; ``None`` pages get only a drawn rectangle (no text)."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        if text is None:
            c.rect(100, 100, 200, 200, fill=1)
        else:
            c.drawString(72, 720, text)
        c.showPage()
    c.save()
    return path


def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.title = "Quarterly report"
    d.add_heading("Introduction", level=1)
    d.add_paragraph("First paragraph before the table.")
    table = d.add_table(rows=2, cols=3)
    for r, values in enumerate([("Name", "Age", "City"), ("Alice", "30", "Tokyo")]):
        for c, value in enumerate(values):
            table.cell(r, c).text = value
    d.add_paragraph("")  # empty paragraphs are dropped
    d.add_paragraph("Closing paragraph after the table.")
    d.save(str(path))
    return path
