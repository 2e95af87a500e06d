"""One contract every file-format reader passes: Documents with source metadata, Japanese text, damaged files.

A format's test is a subclass of :class:`FormatContract` naming the extensions its reader is registered for in
``finderledge.document_loader.FORMATS``, the ``doc_type_detected`` it gives, and how to write a good file (holding
:data:`JAPANESE` and :data:`MARKER`) and a damaged one.  Real files throughout (PDF by reportlab, DOCX by
python-docx); the last class is a format registered by a user, which passes the same contract.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from finderledge.document_loader import (
    FORMATS,
    DocumentLoader,
    EmptyDocumentError,
    LoadError,
    ReadOptions,
    SourceFile,
    make_document,
)

JAPANESE = "東京の天気は晴れ"
MARKER = "warehouse invoice"
TEXT = f"{JAPANESE}、気温は二十度でした。\n{MARKER} for the quarter.\n"


class FormatContract:
    """The behaviour every reader owes the loader (subclasses fill in the format)."""

    suffixes: tuple[str, ...] = ()
    doc_type = ""

    def write_good(self, path: Path) -> None:
        """A file of this format whose text holds JAPANESE and MARKER."""
        raise NotImplementedError

    def write_damaged(self, path: Path) -> None:
        """A file of this format that cannot be read."""
        raise NotImplementedError

    def good(self, folder: Path, suffix: str | None = None) -> Path:
        path = folder / f"good{suffix or self.suffixes[0]}"
        self.write_good(path)
        return path

    def test_registered_for_its_extensions(self) -> None:
        for suffix in self.suffixes:
            reader = FORMATS.get(suffix)
            assert isinstance(reader.binary, bool)
            assert callable(reader.read)

    @pytest.mark.parametrize("which", [0, -1])
    def test_documents_carry_source_metadata(self, tmp_path: Path, which: int) -> None:
        path = self.good(tmp_path, self.suffixes[which])
        docs = DocumentLoader().load_file(path)
        assert docs and all(isinstance(d, Document) and d.page_content.strip() for d in docs)
        locators = [d.metadata["locator"] for d in docs]
        assert len(set(locators)) == len(locators)
        for doc in docs:
            md = doc.metadata
            assert md["source"] == str(path)
            assert md["file_name"] == path.name
            assert md["doc_type_detected"] == self.doc_type
            assert md["source_id"] == (f"{path.name}:{md['locator']}" if md["locator"] else path.name)

    def test_japanese_text_and_the_rest_survive(self, tmp_path: Path) -> None:
        text = "\n".join(d.page_content for d in DocumentLoader().load_file(self.good(tmp_path)))
        assert JAPANESE in text
        assert MARKER in text

    def test_reader_called_directly_gives_what_the_loader_gives(self, tmp_path: Path) -> None:
        path = self.good(tmp_path)
        with path.open("rb") as handle:
            file = SourceFile(path, handle, handle.read(8192))
            direct = FORMATS.get(path.suffix).read(file, ReadOptions())
        assert [d.page_content for d in direct] == [d.page_content for d in DocumentLoader().load_file(path)]

    def test_damaged_file_is_refused_naming_it(self, tmp_path: Path) -> None:
        path = tmp_path / f"damaged{self.suffixes[0]}"
        self.write_damaged(path)
        with pytest.raises(LoadError) as caught:
            DocumentLoader().load_file(path)
        assert str(path) in str(caught.value)
        assert caught.value.reason

    def test_damaged_file_in_a_folder_is_skipped_the_rest_loaded(self, tmp_path: Path) -> None:
        good = self.good(tmp_path)
        damaged = tmp_path / f"damaged{self.suffixes[0]}"
        self.write_damaged(damaged)
        result = DocumentLoader().load(tmp_path)
        assert list(result.files) == [str(good)]
        assert [(s.path, s.kind in ("error", "binary")) for s in result.skipped] == [(str(damaged), True)]
        if result.skipped[0].kind == "error":  # binary content is always skipped, never raised
            with pytest.raises(LoadError, match="damaged"):
                DocumentLoader(on_error="raise").load(tmp_path)

    def test_empty_file_is_empty(self, tmp_path: Path) -> None:
        path = tmp_path / f"empty{self.suffixes[0]}"
        path.write_bytes(b"")
        with pytest.raises(EmptyDocumentError):
            DocumentLoader().load_file(path)


class TestPlainText(FormatContract):
    suffixes = (".txt", ".log")
    doc_type = "text"

    def write_good(self, path: Path) -> None:
        path.write_bytes(TEXT.encode("shift_jis"))  # an undeclared Japanese encoding, detected

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"text\x00\x01\x02" * 100)  # binary content


class TestMarkdown(FormatContract):
    suffixes = (".md", ".markdown")
    doc_type = "markdown"

    def write_good(self, path: Path) -> None:
        path.write_text(f"---\ntitle: 天気\n---\n# 見出し\n\n{TEXT}", encoding="utf-8")

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"# title\n\x00\xff\x00" * 100)


class TestCode(FormatContract):
    suffixes = (".py", ".ts")
    doc_type = "code"

    def write_good(self, path: Path) -> None:
        path.write_text(f'def weather():\n    """{JAPANESE}"""\n    return "{MARKER}"\n', encoding="euc_jp")

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"def f():\x00\x00\x01" * 100)


class TestHtml(FormatContract):
    suffixes = (".html", ".htm")
    doc_type = "html"

    def write_good(self, path: Path) -> None:
        page = f'<html><head><meta charset="shift_jis"><title>天気</title></head><body><p>{TEXT}</p></body></html>'
        path.write_bytes(page.encode("shift_jis"))

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"<html>\x00\x00\xff\xfe" * 100)


class TestJson(FormatContract):
    suffixes = (".json",)
    doc_type = "json"

    def write_good(self, path: Path) -> None:
        path.write_text(json.dumps({"body": TEXT, "n": 1}, ensure_ascii=False), encoding="utf-8")

    def write_damaged(self, path: Path) -> None:
        path.write_text('{"body": "truncated', encoding="utf-8")


class TestJsonLines(FormatContract):
    suffixes = (".jsonl", ".ndjson")
    doc_type = "json"

    def write_good(self, path: Path) -> None:
        lines = [json.dumps({"body": line}, ensure_ascii=False) for line in TEXT.splitlines()]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def write_damaged(self, path: Path) -> None:
        path.write_text('{"body": "fine"}\n{"body": \n', encoding="utf-8")


class TestCsv(FormatContract):
    suffixes = (".csv", ".tsv")
    doc_type = "csv"

    def write_good(self, path: Path) -> None:
        sep = "\t" if path.suffix == ".tsv" else ","
        rows = [sep.join(["city", "note"]), sep.join([JAPANESE, MARKER]), sep.join(["大阪", "曇り"])]
        path.write_bytes(("\n".join(rows) + "\n").encode("cp932"))

    def write_damaged(self, path: Path) -> None:
        path.write_text('a,b\n"' + "x" * 200_000 + '",1\n', encoding="utf-8")  # a field over csv's limit


class TestPdf(FormatContract):
    suffixes = (".pdf",)
    doc_type = "pdf"

    def write_good(self, path: Path) -> None:
        from reportlab.pdfbase import pdfmetrics
        from reportlab.pdfbase.cidfonts import UnicodeCIDFont
        from reportlab.pdfgen import canvas

        pdfmetrics.registerFont(UnicodeCIDFont("HeiseiKakuGo-W5"))
        page = canvas.Canvas(str(path))
        page.setFont("HeiseiKakuGo-W5", 12)
        page.drawString(72, 720, f"{JAPANESE} {MARKER}")
        page.showPage()
        page.save()

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog" + b"\x8f" * 300)


class TestDocx(FormatContract):
    suffixes = (".docx",)
    doc_type = "docx"

    def write_good(self, path: Path) -> None:
        import docx

        document = docx.Document()
        document.add_paragraph(TEXT)
        document.save(str(path))

    def write_damaged(self, path: Path) -> None:
        path.write_bytes(b"PK\x03\x04" + b"\x00\x13" * 200)


class RtfLikeFormat:
    """A user's reader: each "\\par"-separated paragraph of a made-up format is a document."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        data = file.data()
        if not data.startswith(b"{\\fl"):
            raise LoadError(file.path, "not an {\\fl document")
        text = data.decode("utf-8")[4:].rstrip("}")
        parts = [p.strip() for p in text.split("\\par") if p.strip()]
        return [make_document(file.path, p, "fl", f"p{i}", paragraph=i) for i, p in enumerate(parts, 1)]


class TestUserRegisteredFormat(FormatContract):
    suffixes = (".flcontract",)
    doc_type = "fl"

    @pytest.fixture(autouse=True)
    def _registered(self) -> None:
        FORMATS.register(".flcontract", RtfLikeFormat())

    def write_good(self, path: Path) -> None:
        path.write_text("{\\fl" + "\\par".join(TEXT.splitlines()) + "}", encoding="utf-8")

    def write_damaged(self, path: Path) -> None:
        path.write_text("plain words", encoding="utf-8")


def test_every_registered_format_has_a_contract_class() -> None:
    covered: set[str] = set()
    classes: list[Any] = FormatContract.__subclasses__()
    for cls in classes:
        covered.update(FORMATS.get(s).__class__.__name__ for s in cls.suffixes if s in FORMATS)
    built_in = {FORMATS.get(name).__class__.__name__ for name in FORMATS.names()}
    assert built_in <= covered
