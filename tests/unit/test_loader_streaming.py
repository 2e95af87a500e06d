"""Issue 27 (bounded memory for one big file): a big text file is read and decoded in pieces.

Before, the loader held the file's bytes, their text and a newline-normalised copy of that text (tracemalloc
peak 3.0x the size of a 20 MB ASCII file); now it holds the text and at most its pieces while they are joined
(about 2x).  Reading in pieces must give exactly what decoding the whole file gives: line ends split across
pieces, characters split across pieces, BOMs, and a file that is not UTF-8 only after its first piece.
"""

from __future__ import annotations

import codecs
import io
import random
import tracemalloc
from pathlib import Path

import pytest

from finderledge.document_loader import DocumentLoader, decode, decode_bytes, decode_stream


def _words(size: int, seed: int = 5, line_end: str = "\r\n") -> str:
    rng = random.Random(seed)
    words = ["warehouse", "invoice", "refund", "ledger", "vector", "the", "of", "and"]
    lines: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(words) for _ in range(12)) + "." + line_end
        lines.append(line)
        total += len(line)
    return "".join(lines)


def test_a_20_mb_text_file_is_not_held_as_bytes_and_twice_as_text(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(_words(20_000_000).encode("ascii"))
    size = path.stat().st_size
    tracemalloc.start()
    try:
        docs = DocumentLoader().load_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = docs[0].page_content
    assert "\r" not in text and len(text) == size - text.count("\n")  # every CRLF became LF
    assert peak < 2.3 * size, f"peak {peak / size:.2f}x the file size (before: 3.0x)"


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of 7 bytes, so every boundary case falls inside a small input."""
    monkeypatch.setattr(decode, "STREAM_PIECE_BYTES", 7)


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    "text",
    [
        "a\r\nb\r\nc\rd\n\r\n",  # CRLF split across pieces, a lone CR, CR at the end
        "abcdef\r\nxyz",  # "\r" the last byte of a piece, "\n" the first of the next
        "東京の天気は晴れ\r\n大阪は曇り",  # 3-byte characters split across pieces
        "emoji 😀 and 𠮷 split",  # 4-byte characters
        "",
    ],
)
def test_pieces_give_what_the_whole_gives(text: str) -> None:
    data = text.encode("utf-8")
    expected = decode_bytes(data)[0].replace("\r\n", "\n").replace("\r", "\n")
    assert decode_stream(io.BytesIO(data)) == (expected, "utf-8")


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize(
    ("bom", "codec"),
    [(codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")],
)
def test_a_bom_decides_and_is_dropped(bom: bytes, codec: str) -> None:
    data = bom + "東京\r\nwarehouse".encode(codec)
    text, found = decode_stream(io.BytesIO(data))
    assert text == "東京\nwarehouse"
    assert found == decode_bytes(data)[1]


@pytest.mark.usefixtures("small_pieces")
def test_not_utf8_after_the_first_piece_is_guessed_from_the_whole() -> None:
    data = ("plain ascii first " * 3 + "東京の天気は晴れ、気温は二十度でした。" * 20).encode("shift_jis")
    assert decode_stream(io.BytesIO(data)) == decode_bytes(data)
    assert decode_stream(io.BytesIO(data))[1] in ("shift_jis", "cp932")


@pytest.mark.usefixtures("small_pieces")
def test_a_forced_encoding_is_strict_in_every_piece() -> None:
    data = ("ascii " * 5).encode() + "東京".encode()
    with pytest.raises(UnicodeDecodeError):
        decode_stream(io.BytesIO(data), "ascii")
    assert decode_stream(io.BytesIO("\ufeffabc".encode("utf-8")), "utf-8") == ("abc", "utf-8")


def test_a_shift_jis_file_loads_through_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decode, "STREAM_PIECE_BYTES", 64)
    path = tmp_path / "ja.txt"
    head = "plain ascii line\r\n" * 10  # pieces of valid UTF-8 before the first Shift_JIS byte
    path.write_bytes((head + "東京の天気は晴れ。\r\n" * 5000).encode("shift_jis"))
    doc = DocumentLoader().load_file(path)[0]
    assert doc.metadata["encoding"] in ("shift_jis", "cp932")
    assert doc.page_content == (head + "東京の天気は晴れ。\r\n" * 5000).replace("\r\n", "\n")
