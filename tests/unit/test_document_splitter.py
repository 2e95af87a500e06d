from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge.ingest.splitter import DocumentSplitter, child_id, weighted_length
from finderledge.metadata import FL_KEY

JA = (
    "東京リージョンと大阪リージョンの間では、データを自動的に複製するオプションがあります。"
    "災害対策が必要な場合は、バケットの設定でリージョン間レプリケーションを有効にしてください。"
    "追加料金は転送したデータ量に応じて発生します！本当に必要ですか？"
) * 6


def test_japanese_splits_at_sentence_boundaries() -> None:
    splitter = DocumentSplitter(chunk_size=300, chunk_overlap=0)
    chunks = splitter.split_text(JA, "text")
    assert len(chunks) > 2
    for chunk in chunks:
        assert weighted_length(chunk) <= 300
        assert chunk[-1] in "。！？", chunk  # never cut mid-sentence
    assert "".join(chunks) == JA


def test_markdown_and_code_use_their_splitters() -> None:
    splitter = DocumentSplitter(chunk_size=200, chunk_overlap=0)
    md = "# Title\n\nintro " + "word " * 30 + "\n\n## Section two\n\n" + "more text " * 20
    chunks = splitter.split_text(md, "markdown")
    assert any(c.startswith("## Section two") for c in chunks)
    code = "import os\n\n" + "\n\n".join(f"def f{i}(x):\n    return x + {i}  # adds {i}\n" for i in range(12))
    code_chunks = splitter.split_text(code, "code", "python")
    assert all(c.lstrip().startswith(("def ", "import")) for c in code_chunks)


def test_json_is_split_structurally() -> None:
    data = {f"key{i}": {"name": f"item {i}", "text": "lorem ipsum " * 5} for i in range(20)}
    chunks = DocumentSplitter(chunk_size=300, chunk_overlap=0).split_text(json.dumps(data), "json")
    assert len(chunks) > 1
    for chunk in chunks:
        json.loads(chunk)  # every chunk is valid JSON


def test_chunk_metadata_schema_keeps_user_metadata() -> None:
    splitter = DocumentSplitter(chunk_size=300, chunk_overlap=0)
    parent = Document(
        page_content=JA, metadata={"source": "/x/a.txt", "team": "ops", "doc_type_detected": "text"}
    )
    p, kids = splitter.split_document(parent, "P1", child_id)
    assert p.metadata[FL_KEY]["is_parent"] is True and p.metadata[FL_KEY]["split_count"] == len(kids)
    assert p.page_content == JA  # the parent is kept whole
    for i, kid in enumerate(kids):
        info = kid.metadata[FL_KEY]
        assert info["id"] == kid.id == f"P1-{i:04d}"
        assert (info["parent_id"], info["split_index"], info["split_count"]) == ("P1", i, len(kids))
        assert info["is_parent"] is False and info["doc_type"] == "text"
        # the caller's and the loader's keys are kept as they were, and nothing else is added beside them
        assert {k: v for k, v in kid.metadata.items() if k != FL_KEY} == parent.metadata


def test_short_document_is_one_unsplit_chunk() -> None:
    p, kids = DocumentSplitter().split_document(Document(page_content="short"), "P", child_id)
    assert (
        len(kids) == 1 and kids[0].metadata[FL_KEY]["split_count"] == p.metadata[FL_KEY]["split_count"] == 1
    )


def test_markdown_chunks_carry_their_header_path() -> None:
    text = (
        "# Guide\n\nIntro text. "
        + "filler " * 30
        + "\n\n## Install\n\n"
        + "pip install things. " * 12
        + "\n\n```\n# not a header inside a fence\n```\n\n### On Windows\n\n"
        + "use the installer. " * 12
        + "\n\n## Usage\n\n"
        + "call the function. " * 12
    )
    splitter = DocumentSplitter(chunk_size=250, chunk_overlap=0)
    _, kids = splitter.split_document(
        Document(page_content=text, metadata={"doc_type_detected": "markdown"}), "P", child_id
    )
    by_start = {k.page_content.split("\n")[0]: k.metadata[FL_KEY].get("headers") for k in kids}
    assert by_start["# Guide"] == "Guide"
    assert by_start["## Install"] == "Guide > Install"
    assert by_start["### On Windows"] == "Guide > Install > On Windows"
    assert by_start["## Usage"] == "Guide > Usage"
    assert all("not a header" not in (k.metadata[FL_KEY].get("headers") or "") for k in kids)


# -- issue 11: chunk_unit="chars" ------------------------------------------------------------------------
JA_LONG = (
    "東京リージョンと大阪リージョンの間では、データを自動的に複製するオプションがあります。"
    "災害対策が必要な場合は、バケットの設定でリージョン間レプリケーションを有効にしてください。"
    "追加料金は転送したデータ量に応じて発生します。"
    "複製の遅延は通常数秒ですが、大きなオブジェクトでは数分かかることがあります。"
    "設定を変更した後は、管理画面で複製の状態を確認できます。"
) * 12


def test_default_unit_counts_a_cjk_character_three_times() -> None:
    chunks = DocumentSplitter(chunk_size=450, chunk_overlap=0).split_text(JA_LONG, "text")
    assert all(weighted_length(c) <= 450 for c in chunks)
    # 450 Latin-character equivalents hold about 150 Japanese characters (punctuation such as 、。 counts 1)
    assert 130 <= max(len(c) for c in chunks) <= 160


def test_chars_unit_sizes_japanese_chunks_in_characters() -> None:
    splitter = DocumentSplitter(chunk_size=450, chunk_overlap=0, chunk_unit="chars")
    chunks = splitter.split_text(JA_LONG, "text")
    assert "".join(chunks) == JA_LONG and len(chunks) > 3
    longest_sentence = max(len(s) + 1 for s in JA_LONG.split("。") if s)
    for chunk in chunks:
        assert len(chunk) <= 450
        assert chunk[-1] == "。"  # still cut at sentence ends
    for chunk in chunks[:-1]:  # near the size: a chunk stops only when the next sentence would not fit
        assert len(chunk) > 450 - longest_sentence
    overlapping = DocumentSplitter(chunk_size=450, chunk_overlap=60, chunk_unit="chars").split_text(
        JA_LONG, "text"
    )
    assert all(len(c) <= 450 for c in overlapping)


def test_chunk_unit_setting_argument_environment_and_validation(
    monkeypatch: pytest.MonkeyPatch, fake_embeddings
) -> None:
    from finderledge import FinderLedge
    from finderledge.config import Settings
    from finderledge.errors import ConfigurationError

    assert Settings.resolve({}, environ={}, env_file=None).chunk_unit == "weighted"
    assert (
        Settings.resolve({}, environ={"FINDERLEDGE_CHUNK_UNIT": "chars"}, env_file=None).chunk_unit == "chars"
    )
    with pytest.raises(ConfigurationError, match="chunk_unit.*FINDERLEDGE_CHUNK_UNIT"):
        Settings.resolve({}, environ={"FINDERLEDGE_CHUNK_UNIT": 3}, env_file=None)
    with pytest.raises(ConfigurationError, match="'chunk_unit'.*'weighted', 'chars'"):
        Settings.resolve({"chunk_unit": "tokens"}, environ={}, env_file=None)
    with pytest.raises(ValueError, match="chunk_unit"):
        DocumentSplitter(chunk_unit="bytes")
    monkeypatch.setenv("FINDERLEDGE_CHUNK_UNIT", "chars")
    with FinderLedge(
        chunk_size=450, chunk_overlap=0, embedding=fake_embeddings, show_progress=False, env_file=None
    ) as fl:
        (pid,) = fl.add_texts([JA_LONG])
        sizes = [len(c.page_content) for c in fl.get_split_documents(pid)]
    assert max(sizes) <= 450 and min(sizes[:-1]) > 400


def test_chunk_unit_is_recorded_with_the_directory(tmp_path: Path, fake_embeddings) -> None:
    from finderledge import FinderLedge

    with FinderLedge(
        tmp_path / "idx",
        chunk_unit="chars",
        chunk_size=450,
        chunk_overlap=0,
        embedding=fake_embeddings,
        show_progress=False,
        env_file=None,
    ) as fl:
        assert fl.splitter.chunk_unit == "chars"
    with FinderLedge(
        tmp_path / "idx", embedding=fake_embeddings, show_progress=False, env_file=None
    ) as fl:  # reopens as built
        assert (fl.settings.chunk_unit, fl.settings.chunk_size) == ("chars", 450)
        (pid,) = fl.add_texts([JA_LONG])
        assert max(len(c.page_content) for c in fl.get_split_documents(pid)) > 150


def test_markdown_prose_splits_at_sentence_ends_in_japanese_and_english() -> None:
    """Markdown keeps its structural separators (headings, fences, rules) and then falls back to sentence
    ends (。！？ . ! ?) before spaces, as plain text does: a Japanese paragraph is never cut inside a word."""
    s = DocumentSplitter(60, 0, "chars")
    ja = (
        "# 返品\n\n商品到着後 14 日以内であれば返品を受け付けます。未開封の商品に限ります。"
        "返品の送料はお客様のご負担となります。返金は返品の到着を確認してから 5 営業日以内に行います。"
    )
    chunks = s.split_text(ja, "markdown")
    assert chunks[0] == "# 返品"
    assert all(c.endswith("。") for c in chunks[1:]), chunks
    assert "".join(chunks[1:]) == ja.split("\n\n", 1)[1]
    en = "# Title\n\nThis is one sentence that is long. Another sentence follows here! And a third, ends."
    assert DocumentSplitter(40, 0, "chars").split_text(en, "markdown") == [
        "# Title",
        "This is one sentence that is long.",
        "Another sentence follows here!",
        "And a third, ends.",
    ]


def test_pdf_text_with_hard_line_breaks_splits_at_sentence_ends() -> None:
    """Text extracted from a PDF breaks lines where the page did, mid-sentence: a PDF page is split at
    sentence ends before line ends, so a chunk never stops in the middle of a sentence that fits."""
    page = (
        "E3: the water tank is empty. Refill it and press\nstart again. E4: the heater is\n"
        "overheating; unplug the machine and wait\nthirty minutes. E5: the pump is blocked, call\nservice."
    )
    chunks = DocumentSplitter(80, 0, "chars").split_text(page, "pdf")
    assert all(c.rstrip().endswith(".") for c in chunks), chunks
    assert not any(c.rstrip().endswith("heater is") for c in chunks)
