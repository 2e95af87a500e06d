"""Text decoding: the encoding of bytes whose encoding nobody declared, and streaming decode of big files.

Order: a forced encoding (strict) > a BOM (UTF-8/16/32, BOM stripped) > strict UTF-8 > a clean
Shift_JIS/CP932/EUC-JP decode that looks like Japanese > charset-normalizer.  :func:`decode_stream` reads a
file in pieces, so a big UTF-8 (or BOM-marked, or forced-encoding) file is never held as bytes and as text at
once; other encodings are guessed from the whole content, which then is read in one piece.
"""

from __future__ import annotations

import codecs
from typing import BinaryIO

__all__ = [
    "BINARY_SNIFF_BYTES",
    "STREAM_PIECE_BYTES",
    "decode_bytes",
    "decode_stream",
    "looks_binary",
    "normalize_newlines",
]

BINARY_SNIFF_BYTES = 8192  # NUL bytes in this many first bytes mean a binary file
STREAM_PIECE_BYTES = 1024 * 1024  # bytes read and decoded at a time by decode_stream

_JAPANESE_CODECS = ("shift_jis", "cp932", "euc_jp")
_SCORE_SAMPLE_CHARS = 65536  # scoring looks at a prefix; the strict decode still covers every byte
_PREFERRED_ON_TIE = ("utf-8", "cp1252", "iso8859-1", "iso8859-15")


def _japanese_score(text: str) -> float | None:
    """Score how much ``text`` looks like Japanese; None when it clearly does not (mojibake, controls)."""
    kana = kanji = punct = halfwidth = other = 0
    for ch in text:
        o = ord(ch)
        if o < 0x80:
            if o < 0x20 and ch not in "\t\n\r\f\v" or o == 0x7F:
                return None
            continue
        if 0x3041 <= o <= 0x30FF:
            kana += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF:
            kanji += 1
        elif (
            0x3000 <= o <= 0x303F
            or 0xFF01 <= o <= 0xFF60
            or 0xFFE0 <= o <= 0xFFEF
            or 0x2010 <= o <= 0x22FF
            or 0x2460 <= o <= 0x25FF
            or 0x3200 <= o <= 0x33FF
            or o in (0xA7, 0xA8, 0xB0, 0xB1, 0xB4, 0xB6, 0xD7, 0xF7)
        ):
            punct += 1
        elif 0xFF61 <= o <= 0xFF9F:
            halfwidth += 1
        else:
            other += 1
    non_ascii = kana + kanji + punct + halfwidth + other
    if non_ascii == 0 or kana + kanji == 0:
        return None
    if (kana + kanji + punct) / non_ascii < 0.8:
        return None
    return 2.0 * kana + kanji + punct - 2.0 * halfwidth - 3.0 * other


def _decode_japanese(data: bytes) -> tuple[str, str] | None:
    """Best clean Japanese decode of ``data`` as (text, codec), or None."""
    if b"\x1b$B" in data or b"\x1b$@" in data:
        try:
            return data.decode("iso2022_jp"), "iso2022_jp"
        except UnicodeDecodeError:
            pass
    decoded: dict[str, str] = {}
    best: tuple[float, str] | None = None
    for codec in _JAPANESE_CODECS:
        try:
            text = data.decode(codec)
        except UnicodeDecodeError:
            continue
        decoded[codec] = text
        score = _japanese_score(text[:_SCORE_SAMPLE_CHARS])
        if score is not None and (best is None or score > best[0]):
            best = (score, codec)
    if best is None:
        return None
    codec = best[1]
    # Shift_JIS and CP932 share most bytes but map a few differently (0x8160 is U+301C in Shift_JIS,
    # U+FF5E in CP932; NEC specials such as "①" exist only in CP932).  Files written on Windows are CP932,
    # so when both decode and disagree, CP932 wins.
    if codec == "shift_jis" and "cp932" in decoded and decoded["cp932"] != decoded["shift_jis"]:
        codec = "cp932"
    return decoded[codec], codec


def _normalize_codec(name: str) -> str:
    try:
        return codecs.lookup(name).name
    except LookupError:
        return name


def decode_bytes(data: bytes, encoding: str | None = None) -> tuple[str, str]:
    """Decode ``data`` to text and return ``(text, encoding)``; raise ``UnicodeError`` when impossible.

    Order: forced ``encoding`` (strict) > BOM (UTF-8/16/32, BOM stripped) > strict UTF-8 > a clean
    Shift_JIS/CP932/EUC-JP decode that looks like Japanese > charset-normalizer.
    """
    if encoding is not None:
        text = data.decode(encoding)
        text = text.removeprefix("\ufeff")
        return text, _normalize_codec(encoding)
    for bom, codec in (
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            try:
                return data.decode(codec), codec
            except UnicodeDecodeError:
                break
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    japanese = _decode_japanese(data)
    if japanese is not None:
        return japanese
    from charset_normalizer import from_bytes

    matches = from_bytes(data)
    best = matches.best()
    if best is None:
        raise UnicodeError("cannot determine the text encoding")
    # charset-normalizer often ties cp1250/cp1252 on Western text and then picks by list order;
    # among equally good candidates prefer the far more common Western encodings.
    tied = {
        _normalize_codec(m.encoding): m
        for m in matches
        if abs(m.chaos - best.chaos) < 1e-6 and m.coherence >= best.coherence - 1e-6
    }
    for codec in _PREFERRED_ON_TIE:
        if codec in tied:
            return str(tied[codec]), codec
    return str(best), _normalize_codec(best.encoding)


def looks_binary(head: bytes) -> bool:
    """NUL bytes in the first 8 KiB mean binary, except for UTF-16/32 text with a BOM."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def normalize_newlines(text: str) -> str:
    """``text`` with CRLF and CR line ends turned into LF."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_stream(stream: BinaryIO, encoding: str | None = None) -> tuple[str, str]:
    """Decode a whole seekable binary stream like :func:`decode_bytes`, with newlines normalised.

    The stream is read and decoded :data:`STREAM_PIECE_BYTES` at a time when its codec is known from the
    start (forced, a BOM, or UTF-8 until proven otherwise), so memory holds the text and one piece, never the
    bytes and the text of a whole big file.  When strict UTF-8 fails part way, the content is read again in
    one piece and guessed by :func:`decode_bytes` (Japanese codecs and charset-normalizer need all of it).
    """
    first = stream.read(STREAM_PIECE_BYTES)
    codec = encoding
    if codec is None:
        codec = next((name for bom, name in _BOMS if first.startswith(bom)), "utf-8")
    decoder = codecs.getincrementaldecoder(codec)("strict")
    pieces: list[str] = []
    carry = ""  # a piece ending in "\r" keeps it until the next piece shows whether "\n" follows
    raw = first
    try:
        while True:
            final = not raw
            text = carry + decoder.decode(raw, final=final)
            carry = ""
            if not final and text.endswith("\r"):
                text, carry = text[:-1], "\r"
            pieces.append(normalize_newlines(text))
            if final:
                break
            raw = stream.read(STREAM_PIECE_BYTES)
    except UnicodeDecodeError:
        if encoding is not None:
            raise
        del pieces
        stream.seek(0)
        text, codec = decode_bytes(stream.read())
        return normalize_newlines(text), codec
    if encoding is not None:
        if pieces and pieces[0].startswith("\ufeff"):
            pieces[0] = pieces[0][1:]
        codec = _normalize_codec(encoding)
    return "".join(pieces), codec
