"""Tests for finderledge.document_loader with real fixture files built in tmp_path."""

from __future__ import annotations

import io
import json
import logging
import os
import zipfile
from pathlib import Path

import pytest
from files import make_docx, make_pdf

from finderledge.document_loader import (
    DocumentLoader,
    EmptyDocumentError,
    LoadError,
    LoadResult,
    SkippedFile,
    UnsupportedFileError,
    decode_bytes,
    detect_doc_type,
    detect_language,
)

JA_SENTENCES = "これは日本語の文章です。\n東京の天気は晴れ、気温は二十度でした。\n"


# ----------------------------------------------------------------------------- fixture builders


def one(docs: list) -> object:
    assert len(docs) == 1
    return docs[0]


# ----------------------------------------------------------------------------- PDF


def test_pdf_one_document_per_page(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "report.pdf", ["Alpha page one", "Beta page two", "Gamma page three"])
    docs = DocumentLoader().load_file(pdf)
    assert [d.page_content for d in docs] == ["Alpha page one", "Beta page two", "Gamma page three"]
    assert [d.metadata["page"] for d in docs] == [1, 2, 3]
    assert [d.metadata["locator"] for d in docs] == ["p1", "p2", "p3"]
    assert [d.metadata["source_id"] for d in docs] == ["report.pdf:p1", "report.pdf:p2", "report.pdf:p3"]
    m = docs[2].metadata
    assert m["source"] == str(pdf.absolute())
    assert m["file_name"] == "report.pdf"
    assert m["doc_type_detected"] == "pdf"
    assert m["total_pages"] == 3
    assert "language" not in m


def test_pdf_empty_page_is_skipped(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "gap.pdf", ["First", None, "Third"])
    docs = DocumentLoader().load_file(pdf)
    assert [(d.metadata["page"], d.page_content) for d in docs] == [(1, "First"), (3, "Third")]


def test_pdf_without_text_is_reported(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "scan.pdf", [None, None])
    with pytest.raises(LoadError, match=r"scan\.pdf: no extractable text \(scanned PDF\?\)"):
        DocumentLoader().load_file(pdf)
    result = DocumentLoader(on_error="skip").load(tmp_path)
    assert result.documents == []
    assert result.skipped == [SkippedFile(str(pdf.absolute()), "no extractable text (scanned PDF?)", "error")]
    with pytest.raises(LoadError, match="no extractable text"):
        DocumentLoader(on_error="raise").load(tmp_path)


# ----------------------------------------------------------------------------- DOCX


def test_docx_paragraphs_and_table_in_order(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "report.docx")
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == (
        "Introduction\n"
        "First paragraph before the table.\n"
        "Name | Age | City\n"
        "Alice | 30 | Tokyo\n"
        "Closing paragraph after the table."
    )
    assert doc.metadata["doc_type_detected"] == "docx"
    assert doc.metadata["title"] == "Quarterly report"
    assert doc.metadata["locator"] == ""
    assert doc.metadata["source_id"] == "report.docx"


def test_docx_merged_cells_once_and_trailing_empties_dropped(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    t = d.add_table(rows=2, cols=3)
    t.cell(0, 0).merge(t.cell(0, 1)).text = "merged"
    t.cell(0, 2).text = "c"
    t.cell(1, 0).text = "x"
    t.cell(1, 2).text = "z"
    d.save(str(tmp_path / "m.docx"))
    doc = one(DocumentLoader().load_file(tmp_path / "m.docx"))
    assert doc.page_content == "merged | c\nx |  | z"
    assert "title" not in doc.metadata


# ----------------------------------------------------------------------------- CSV


def test_csv_comma_rows(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text('name,age,note\nAlice,30,"likes tea, and cake"\n\nBob,25,\n', encoding="utf-8")
    docs = DocumentLoader().load_file(path)
    assert [d.page_content for d in docs] == [
        "name: Alice\nage: 30\nnote: likes tea, and cake",
        "name: Bob\nage: 25",
    ]
    assert [d.metadata["row"] for d in docs] == [1, 2]
    assert [d.metadata["locator"] for d in docs] == ["r1", "r2"]
    assert docs[1].metadata["source_id"] == "people.csv:r2"
    assert docs[0].metadata["doc_type_detected"] == "csv"
    assert docs[0].metadata["encoding"] == "utf-8"


def test_csv_semicolon_with_commas_in_values(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("city;comment\nParis;big, old\nLyon;small, new\n", encoding="utf-8")
    docs = DocumentLoader().load_file(path)
    assert [d.page_content for d in docs] == [
        "city: Paris\ncomment: big, old",
        "city: Lyon\ncomment: small, new",
    ]


def test_tsv(tmp_path: Path) -> None:
    path = tmp_path / "data.tsv"
    path.write_text("a\tb\n1\t2\n", encoding="utf-8")
    assert one(DocumentLoader().load_file(path)).page_content == "a: 1\nb: 2"


def test_csv_shift_jis(tmp_path: Path) -> None:
    path = tmp_path / "sjis.csv"
    path.write_bytes("名前,都市\n山田太郎,東京\n佐藤花子,大阪\n".encode("shift_jis"))
    docs = DocumentLoader().load_file(path)
    assert [d.page_content for d in docs] == ["名前: 山田太郎\n都市: 東京", "名前: 佐藤花子\n都市: 大阪"]
    assert docs[0].metadata["encoding"] == "shift_jis"


def test_csv_header_only_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("a,b,c\n", encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match="no data rows"):
        DocumentLoader().load_file(path)
    for policy in ("skip", "raise"):
        result = DocumentLoader(on_error=policy).load(path)  # type: ignore[arg-type]
        assert result.documents == [] and result.files_seen == 1 and result.files_loaded == 0
        assert result.skipped == [SkippedFile(str(path.absolute()), "no data rows", "empty")]


# ----------------------------------------------------------------------------- HTML


def test_html_visible_text_only(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<!DOCTYPE html><html><head><title> My  Page </title>"
        "<style>body { color: red }</style><script>var hidden = 1;</script></head>"
        "<body><h1>Heading</h1><p>Hello <b>bold</b> &amp; world</p>"
        "<noscript>enable js</noscript><template><p>tmpl</p></template>"
        "<div>Line one<br>Line two</div>"
        "<table><tr><td>a</td><td>b</td></tr></table>"
        "<script type='text/javascript'>alert('x')</script></body></html>",
        encoding="utf-8",
    )
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == "Heading\nHello bold & world\nLine one\nLine two\na | b"
    assert doc.metadata["title"] == "My Page"
    assert doc.metadata["doc_type_detected"] == "html"


def test_html_pre_keeps_whitespace(tmp_path: Path) -> None:
    path = tmp_path / "code.html"
    path.write_text(
        "<html><body><p>Intro</p><pre>def f():\n    return 1\n\nx = 2</pre>"
        "<ul><li>one</li><li>two</li></ul></body></html>",
        encoding="utf-8",
    )
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == "Intro\ndef f():\n    return 1\n\nx = 2\none\ntwo"
    assert "title" not in doc.metadata
    (tmp_path / "blank.html").write_text("<html><script>x()</script></html>", encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match="no text content"):
        DocumentLoader().load_file(tmp_path / "blank.html")


def test_html_meta_charset_shift_jis(tmp_path: Path) -> None:
    path = tmp_path / "ja.htm"
    html = '<html><head><meta charset="Shift_JIS"><title>日本</title></head><body><p>こんにちは</p></body></html>'
    path.write_bytes(html.encode("shift_jis"))
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == "こんにちは"
    assert doc.metadata["title"] == "日本"
    assert doc.metadata["encoding"] == "shift_jis"


# ----------------------------------------------------------------------------- plain text and encodings


@pytest.mark.parametrize(
    ("encoding", "text", "expected_codec"),
    [
        ("utf-8", JA_SENTENCES + "English too.\n", "utf-8"),
        ("utf-8-sig", JA_SENTENCES, "utf-8-sig"),
        ("shift_jis", JA_SENTENCES, "shift_jis"),
        ("cp932", "丸数字①②③と波ダッシュ～を含む文章です。\n", "cp932"),
        ("euc_jp", JA_SENTENCES, "euc_jp"),
        ("utf-16", JA_SENTENCES, "utf-16"),
    ],
)
def test_text_encodings(tmp_path: Path, encoding: str, text: str, expected_codec: str) -> None:
    path = tmp_path / "note.txt"
    path.write_bytes(text.encode(encoding))
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == text  # BOM stripped, every character exact
    assert doc.metadata["encoding"] == expected_codec
    assert doc.metadata["doc_type_detected"] == "text"


def test_cp932_differs_from_shift_jis() -> None:
    data = "波ダッシュ～です。".encode("cp932")
    assert data.decode("shift_jis") != "波ダッシュ～です。"  # the fixture really exercises the difference
    assert decode_bytes(data) == ("波ダッシュ～です。", "cp932")


def test_latin1_falls_back_to_charset_normalizer() -> None:
    original = "Le cœur a ses raisons. Café crème brûlée, déjà vu à la française.\n"
    assert decode_bytes(original.encode("cp1252")) == (original, "cp1252")


def test_forced_encoding(tmp_path: Path) -> None:
    path = tmp_path / "forced.txt"
    path.write_bytes("日本".encode("euc_jp"))
    assert one(DocumentLoader(encoding="euc_jp").load_file(path)).metadata["encoding"] == "euc_jp"
    with pytest.raises(LoadError, match="not valid utf-8"):
        DocumentLoader(encoding="utf-8").load_file(path)
    with pytest.raises(LookupError):
        DocumentLoader(encoding="no-such-codec")


def test_crlf_normalised_and_markdown_as_is(tmp_path: Path) -> None:
    md = tmp_path / "README.md"
    md.write_bytes(b"# Title\r\n\r\nSome *text*.\r\n")
    doc = one(DocumentLoader().load_file(md))
    assert doc.page_content == "# Title\n\nSome *text*.\n"
    assert doc.metadata["doc_type_detected"] == "markdown"
    for name in ("notes.rst", "server.log"):
        (tmp_path / name).write_text("plain", encoding="utf-8")
        assert one(DocumentLoader().load_file(tmp_path / name)).metadata["doc_type_detected"] == "text"


def test_extensionless_text_file(tmp_path: Path) -> None:
    (tmp_path / "LICENSE").write_text("MIT License\n", encoding="utf-8")
    (tmp_path / "tool").write_text("#!/usr/bin/env python3\nprint('hi')\n", encoding="utf-8")
    lic = one(DocumentLoader().load_file(tmp_path / "LICENSE"))
    assert (lic.page_content, lic.metadata["doc_type_detected"]) == ("MIT License\n", "text")
    tool = one(DocumentLoader().load_file(tmp_path / "tool"))
    assert (tool.metadata["doc_type_detected"], tool.metadata["language"]) == ("code", "python")


def test_empty_file_is_skipped_not_error(tmp_path: Path) -> None:
    (tmp_path / "__init__.py").write_text("", encoding="utf-8")
    with pytest.raises(EmptyDocumentError, match="empty file"):
        DocumentLoader().load_file(tmp_path / "__init__.py")
    result = DocumentLoader(on_error="raise").load(tmp_path)
    assert [(s.reason, s.kind) for s in result.skipped] == [("empty file", "empty")]


# ----------------------------------------------------------------------------- JSON / JSONL


def test_json_whole_document(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text('{"name":"東京","n":[1,2]}', encoding="utf-8")
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == json.dumps({"name": "東京", "n": [1, 2]}, ensure_ascii=False, indent=2)
    assert "東京" in doc.page_content
    assert (doc.metadata["doc_type_detected"], doc.metadata["locator"]) == ("json", "")


def test_json_text_field_list(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    records = [
        {"id": 7, "body": "First answer", "lang": "en", "source": "wiki", "tags": ["x"]},
        {"id": 8, "body": "二つ目の回答", "lang": "ja", "score": 0.5, "ok": True},
    ]
    path.write_text(json.dumps(records), encoding="utf-8")
    docs = DocumentLoader(json_text_field="body").load_file(path)
    assert [d.page_content for d in docs] == ["First answer", "二つ目の回答"]
    m0, m1 = docs[0].metadata, docs[1].metadata
    assert (m0["id"], m0["lang"], m0["json_source"], m0["item"], m0["locator"]) == (7, "en", "wiki", 1, "i1")
    assert m0["source"] == str(path.absolute())  # the clashing JSON key did not overwrite it
    assert "tags" not in m0 and "body" not in m0
    assert (m1["score"], m1["ok"], m1["source_id"]) == (0.5, True, "faq.json:i2")


def test_json_text_field_single_object_and_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text('{"text": "hello", "author": "me"}', encoding="utf-8")
    doc = one(DocumentLoader(json_text_field="text").load_file(path))
    assert (doc.page_content, doc.metadata["author"], doc.metadata["locator"]) == ("hello", "me", "")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"text": "a"}, {"other": "b"}]', encoding="utf-8")
    with pytest.raises(LoadError, match=r"bad\.json: item 2: missing text field 'text'"):
        DocumentLoader(json_text_field="text").load_file(bad)


def test_jsonl_with_and_without_field(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"text": "alpha", "k": 1}\n\n{"text": "ベータ", "k": 2}\n', encoding="utf-8")
    docs = DocumentLoader(json_text_field="text").load_file(path)
    assert [(d.page_content, d.metadata["k"], d.metadata["line"], d.metadata["locator"]) for d in docs] == [
        ("alpha", 1, 1, "l1"),
        ("ベータ", 2, 3, "l3"),
    ]
    raw = DocumentLoader().load_file(path)
    assert [d.page_content for d in raw] == ['{"text": "alpha", "k": 1}', '{"text": "ベータ", "k": 2}']
    assert raw[1].metadata["source_id"] == "rows.jsonl:l3"


def test_json_empty_text_field_gives_no_document(tmp_path: Path) -> None:
    path = tmp_path / "e.json"
    path.write_text('[{"t": "kept"}, {"t": "  "}, {"t": 42}]', encoding="utf-8")
    docs = DocumentLoader(json_text_field="t").load_file(path)
    assert [(d.page_content, d.metadata["locator"]) for d in docs] == [("kept", "i1"), ("42", "i3")]


def test_jsonl_missing_field_names_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.ndjson"
    path.write_text('{"text": "a"}\n{"body": "b"}\n', encoding="utf-8")
    with pytest.raises(LoadError, match=r"rows\.ndjson: line 2: missing text field 'text'") as info:
        DocumentLoader(json_text_field="text").load_file(path)
    assert info.value.path == str(path.absolute())


def test_invalid_json_policies(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"a": ', encoding="utf-8")
    (tmp_path / "ok.txt").write_text("fine", encoding="utf-8")
    with pytest.raises(LoadError, match=r"broken\.json: invalid JSON"):
        DocumentLoader(on_error="raise").load(tmp_path)
    result = DocumentLoader(on_error="skip").load(tmp_path)
    assert [d.page_content for d in result.documents] == ["fine"]
    assert [(Path(s.path).name, s.kind) for s in result.skipped] == [("broken.json", "error")]
    assert result.skipped[0].reason.startswith("invalid JSON")


# ----------------------------------------------------------------------------- code


@pytest.mark.parametrize(
    ("name", "doc_type", "language"),
    [
        ("app.py", "code", "python"),
        ("ui.tsx", "code", "ts"),
        ("main.js", "code", "js"),
        ("Main.java", "code", "java"),
        ("main.go", "code", "go"),
        ("lib.rs", "code", "rust"),
        ("x.hpp", "code", "cpp"),
        ("x.h", "code", "c"),
        ("Prog.cs", "code", "csharp"),
        ("t.sol", "code", "sol"),
        ("m.hs", "code", "haskell"),
        ("run.sh", "text", None),
        ("q.sql", "text", None),
        ("conf.yaml", "text", None),
        ("s.css", "text", None),
    ],
)
def test_code_files(tmp_path: Path, name: str, doc_type: str, language: str | None) -> None:
    path = tmp_path / name
    path.write_text("x = 1  // code\n", encoding="utf-8")
    doc = one(DocumentLoader().load_file(path))
    assert doc.page_content == "x = 1  // code\n"
    assert doc.metadata["doc_type_detected"] == doc_type
    assert doc.metadata.get("language") == language


def test_language_values_are_langchain_languages() -> None:
    from langchain_text_splitters import Language

    from finderledge.document_loader import CODE_LANGUAGES

    values = {lang.value for lang in Language}
    assert set(CODE_LANGUAGES.values()) <= values


# ----------------------------------------------------------------------------- detection for raw text


def test_detect_doc_type_raw_text() -> None:
    assert detect_doc_type(None, "# Title\n\nBody") == "markdown"
    assert detect_doc_type(None, "Intro\n```python\nx = 1\n```\n") == "markdown"
    assert detect_doc_type(None, "<!DOCTYPE html><html><body>x</body></html>") == "html"
    assert detect_doc_type(None, '[{"a": 1}]') == "json"
    assert detect_doc_type(None, '"just a string"') == "text"
    py = "import os\n\n# helper\ndef main(argv):\n    return 0\n"
    assert (detect_doc_type(None, py), detect_language(py)) == ("code", "python")
    assert detect_doc_type(None, "The class of 2020 met at noon.") == "text"
    assert detect_language("# Title\n\nBody") is None
    assert detect_doc_type(None, "") == "text"


def test_detect_doc_type_with_path() -> None:
    assert detect_doc_type("a/b/notes.md", "") == "markdown"
    assert detect_doc_type("x.txt", "# looks like markdown") == "text"  # the extension decides
    assert detect_doc_type("x.TSV", "") == "csv"
    assert detect_doc_type("x.jsonl", "") == "json"
    assert (detect_doc_type("x.kt", ""), detect_language("", "x.kt")) == ("code", "kotlin")
    assert detect_doc_type("README", "# Hello") == "markdown"


# ----------------------------------------------------------------------------- unsupported / corrupt


def test_binary_and_unsupported_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "blob").write_bytes(b"ELF\x00\x01\x02" * 10)
    (tmp_path / "fake.txt").write_bytes(b"abc\x00def")
    (tmp_path / "good.md").write_text("# ok", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="finderledge.document_loader"):
        result = DocumentLoader(on_error="raise").load(tmp_path)
    assert [d.metadata["file_name"] for d in result.documents] == ["good.md"]
    assert result.files_seen == 4 and result.files_loaded == 1
    assert [(Path(s.path).name, s.reason, s.kind) for s in result.skipped] == [
        ("blob", "binary file", "binary"),
        ("fake.txt", "binary file", "binary"),
        ("image.png", "unsupported file type '.png'", "unsupported"),
    ]
    assert "unsupported file type '.png'" in caplog.text
    with pytest.raises(UnsupportedFileError):
        DocumentLoader().load_file(tmp_path / "image.png")
    assert not DocumentLoader.is_supported(tmp_path / "image.png")
    assert not DocumentLoader.is_supported(tmp_path / "blob")
    assert DocumentLoader.is_supported(tmp_path / "good.md")
    assert DocumentLoader.is_supported("X.PDF")


def test_corrupt_pdf_and_docx_policies(tmp_path: Path) -> None:
    (tmp_path / "a_garbage.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf at all")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "not a word document")
    (tmp_path / "b_broken.docx").write_bytes(buf.getvalue())
    (tmp_path / "c_notzip.docx").write_bytes(b"plain bytes, no zip")
    (tmp_path / "d_fine.txt").write_text("still loaded", encoding="utf-8")

    with pytest.raises(LoadError) as info:
        DocumentLoader(on_error="raise").load(tmp_path)
    assert info.value.path == str((tmp_path / "a_garbage.pdf").absolute())
    assert "cannot read PDF" in str(info.value) and "a_garbage.pdf" in str(info.value)

    result = DocumentLoader(on_error="skip").load(tmp_path)
    assert [d.page_content for d in result.documents] == ["still loaded"]
    assert [Path(s.path).name for s in result.skipped] == ["a_garbage.pdf", "b_broken.docx", "c_notzip.docx"]
    assert all(s.kind == "error" for s in result.skipped)
    assert result.skipped[0].reason.startswith("cannot read PDF")
    assert result.skipped[1].reason.startswith("cannot read DOCX")
    assert (result.files_seen, result.files_loaded) == (4, 1)

    for name in ("a_garbage.pdf", "b_broken.docx", "c_notzip.docx"):
        with pytest.raises(LoadError, match=name.replace(".", r"\.")):
            DocumentLoader().load_file(tmp_path / name)


def test_source_is_normalised_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    monkeypatch.chdir(tmp_path / "sub")
    doc = one(DocumentLoader().load_file("../a.txt"))
    assert doc.metadata["source"] == str(tmp_path / "a.txt")


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match="no such file"):
        DocumentLoader().load(tmp_path / "nope.txt")
    with pytest.raises(LoadError, match="no such file"):
        DocumentLoader().load_file(tmp_path / "nope.txt")
    with pytest.raises(LoadError, match="not a directory"):
        (tmp_path / "f.txt").write_text("x", encoding="utf-8")
        DocumentLoader().load_directory(tmp_path / "f.txt")


# ----------------------------------------------------------------------------- directories


def _tree(root: Path) -> None:
    files = {
        "README.md": "# Root",
        "docs/guide.md": "# Guide",
        "docs/api/ref.md": "# Ref",
        "docs/notes.txt": "notes",
        "src/app.py": "def main():\n    pass\n",
        "node_modules/pkg/index.md": "# vendored",
        "src/node_modules/x.md": "# nested vendored",
        ".git/HEAD.md": "# hidden dir",
        ".hidden.md": "# hidden file",
        "build/out.log": "log line",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


def _rel(result: LoadResult, root: Path) -> list[str]:
    return [Path(d.metadata["source"]).relative_to(root).as_posix() for d in result.documents]


def test_directory_sorted_and_hidden_skipped(tmp_path: Path) -> None:
    _tree(tmp_path)
    result = DocumentLoader().load_directory(tmp_path)
    assert _rel(result, tmp_path) == [
        "README.md",
        "build/out.log",
        "docs/api/ref.md",
        "docs/guide.md",
        "docs/notes.txt",
        "node_modules/pkg/index.md",
        "src/app.py",
        "src/node_modules/x.md",
    ]
    assert result.files_seen == 8 and result.files_loaded == 8 and result.skipped == []
    assert list(result.files) == [d.metadata["source"] for d in result.documents]
    assert result.files[str(tmp_path / "src" / "app.py")][0].metadata["language"] == "python"
    with_hidden = DocumentLoader(include_hidden=True).load_directory(tmp_path)
    assert {".git/HEAD.md", ".hidden.md"} <= set(_rel(with_hidden, tmp_path))


def test_include_exclude_globs(tmp_path: Path) -> None:
    _tree(tmp_path)
    loader = DocumentLoader(include=["**/*.md"], exclude=["**/node_modules/**", ".git/**"])
    assert _rel(loader.load(tmp_path), tmp_path) == ["README.md", "docs/api/ref.md", "docs/guide.md"]
    only_docs = DocumentLoader(include=["docs/*.md"])
    assert _rel(only_docs.load(tmp_path), tmp_path) == ["docs/guide.md"]
    deep = DocumentLoader(include=["docs/**"], exclude=["docs/api/**"])
    assert _rel(deep.load(tmp_path), tmp_path) == ["docs/guide.md", "docs/notes.txt"]
    by_name = DocumentLoader(include=["*.md"], exclude=["node_modules"])  # no "/": any depth
    assert _rel(by_name.load(tmp_path), tmp_path) == ["README.md", "docs/api/ref.md", "docs/guide.md"]
    char_class = DocumentLoader(include=["src/*.[p]y", "build/*.lo?"])
    assert _rel(char_class.load(tmp_path), tmp_path) == ["build/out.log", "src/app.py"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_symlink_loop_followed_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.txt").write_text("x", encoding="utf-8")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "y.txt").write_text("y", encoding="utf-8")
    try:
        os.symlink(root, root / "a" / "loop")  # points back to the root
        os.symlink(outside, root / "link1")
        os.symlink(outside, root / "link2")  # the same real directory again
    except OSError:
        pytest.skip("symlinks not permitted")
    result = DocumentLoader(follow_symlinks=True).load_directory(root)
    assert _rel(result, root) == ["a/x.txt", "link1/y.txt"]
    default = DocumentLoader().load_directory(root)  # symlinks are not followed unless asked
    assert _rel(default, root) == ["a/x.txt"]
    assert sorted(Path(s.path).name for s in default.skipped if s.kind == "symlink") == [
        "link1",
        "link2",
        "loop",
    ]


def test_progress_bar(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.txt").write_text("a", encoding="utf-8")
    DocumentLoader(show_progress=True).load(tmp_path)
    assert "Loading files" in capsys.readouterr().err
    DocumentLoader(show_progress=False).load(tmp_path)
    DocumentLoader().load(tmp_path)  # None: stderr is not a TTY under pytest
    assert "Loading files" not in capsys.readouterr().err


def test_single_file_load_result(tmp_path: Path) -> None:
    path = tmp_path / "a.txt"
    path.write_text("hello", encoding="utf-8")
    result = DocumentLoader().load(path)
    assert (result.files_seen, result.files_loaded, result.skipped) == (1, 1, [])
    assert result.files == {str(path.absolute()): result.documents}
    assert result.documents[0].metadata == {
        "source": str(path.absolute()),
        "file_name": "a.txt",
        "doc_type_detected": "text",
        "locator": "",
        "source_id": "a.txt",
        "encoding": "utf-8",
    }


def test_bad_on_error_value() -> None:
    with pytest.raises(ValueError):
        DocumentLoader(on_error="ignore")  # type: ignore[arg-type]
