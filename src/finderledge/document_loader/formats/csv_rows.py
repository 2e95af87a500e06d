"""CSV and TSV: one document per data row ("column: value" lines), the delimiter detected."""

from __future__ import annotations

import csv
import io
import logging

from langchain_core.documents import Document

from ...errors import LoadError
from ..paths import safe_path
from ..results import EmptyDocumentError
from .base import ReadOptions, SourceFile, decode_data, make_document

__all__ = ["CSV", "CsvFormat", "detect_delimiter"]

logger = logging.getLogger(__name__)


class CsvFormat:
    """``.csv``/``.tsv`` files: the first non-empty row is the header; extra values become ``column_<n>``."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document per data row."""
        path, suffix = file.path, file.suffix
        text, codec = decode_data(path, file.data(), options.encoding)
        delimiter = detect_delimiter(text, prefer_tab=suffix == ".tsv")
        try:
            rows = list(csv.reader(io.StringIO(text), delimiter=delimiter))
        except csv.Error as exc:
            raise LoadError(path, f"cannot parse CSV: {exc}") from exc
        rows = [r for r in rows if any(c.strip() for c in r)]
        if not rows:
            raise EmptyDocumentError(path, "empty file")
        header = [h.strip() or f"column_{i + 1}" for i, h in enumerate(rows[0])]
        docs: list[Document] = []
        for number, row in enumerate(rows[1:], start=1):
            if len(row) > len(header) and any(c.strip() for c in row[len(header) :]):
                logger.warning(
                    "%s: row %d has %d fields but the header has %d; the extra values are kept as %s",
                    safe_path(path),
                    number,
                    len(row),
                    len(header),
                    ", ".join(f"column_{i + 1}" for i in range(len(header), len(row))),
                )
            lines = []
            for i, value in enumerate(row):
                value = value.strip()
                if not value:
                    continue
                name = header[i] if i < len(header) else f"column_{i + 1}"
                lines.append(f"{name}: {value}")
            docs.append(
                make_document(path, "\n".join(lines), "csv", f"r{number}", row=number, encoding=codec)
            )
        if not docs:
            raise EmptyDocumentError(path, "no data rows")
        return docs


CSV = CsvFormat()


def detect_delimiter(text: str, *, prefer_tab: bool = False) -> str:
    """Pick the CSV delimiter: csv.Sniffer when its answer gives consistent rows, else ",", "\t", ";"."""
    sample = text[:65536]
    if len(text) > len(sample) and "\n" in sample:
        sample = sample[: sample.rindex("\n")]  # drop the cut-off last line
    sample = "\n".join([line for line in sample.split("\n")[:50] if line.strip()])
    candidates = ["\t", ",", ";"] if prefer_tab else [",", "\t", ";"]

    def field_count(delim: str) -> int:
        """Fields per row when every sample row has the same number (> 1), else 0."""
        try:
            counts = {len(r) for r in csv.reader(io.StringIO(sample), delimiter=delim) if r}
        except csv.Error:
            return 0
        if len(counts) != 1:
            return 0
        n = counts.pop()
        return n if n > 1 else 0

    try:
        sniffed: str | None = csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        sniffed = None
    if sniffed and field_count(sniffed):
        return sniffed
    best = max((field_count(d), -i, d) for i, d in enumerate(candidates))
    if best[0]:
        return best[2]
    first = sample.split("\n", 1)[0]
    top = max((first.count(d), -i, d) for i, d in enumerate(candidates))
    return top[2] if top[0] else candidates[0]
