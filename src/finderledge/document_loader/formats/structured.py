"""JSON and JSON Lines: the whole record pretty-printed, or with ``json_text_field`` one document per record
from that field (the record's other scalar fields become metadata)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from ...errors import LoadError
from ..sniff import RESERVED_KEYS
from .base import ReadOptions, SourceFile, decode_data, make_document

__all__ = ["JSON", "JSONL", "JsonFormat", "JsonLinesFormat"]

logger = logging.getLogger(__name__)


def scalar_metadata(obj: dict[str, Any], skip: str) -> dict[str, Any]:
    """The record's scalar fields but ``skip``; a field named like a loader key is stored as ``json_<name>``."""
    meta: dict[str, Any] = {}
    for key, value in obj.items():
        if key == skip or value is None or not isinstance(value, (str, int, float, bool)):
            continue
        name = f"json_{key}" if key in RESERVED_KEYS else str(key)
        meta[name] = value
    return meta


def field_text(value: Any) -> str:
    """A field's value as text (objects and lists as JSON)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def json_record(
    path: Path, obj: dict[str, Any], field_name: str, locator: str, codec: str, *, where: str, **extra: Any
) -> Document | None:
    """One document from ``obj[field_name]``; None when that text is empty."""
    if obj.get(field_name) is None:
        raise LoadError(path, f"{where}: missing text field '{field_name}'")
    text = field_text(obj[field_name])
    if not text.strip():
        logger.debug("%s: %s has an empty '%s'; no document", path, where, field_name)
        return None
    meta = scalar_metadata(obj, field_name)
    return make_document(path, text, "json", locator, meta, encoding=codec, **extra)


class JsonFormat:
    """``.json``: one document, or one per object of a top-level list with ``json_text_field``."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """The file's documents (see the class docstring)."""
        path = file.path
        text, codec = decode_data(path, file.data(), options.encoding)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise LoadError(path, f"invalid JSON: {exc}") from exc
        field_name = options.json_text_field
        if field_name is None:
            pretty = json.dumps(obj, ensure_ascii=False, indent=2)
            return [make_document(path, pretty, "json", encoding=codec)]
        if isinstance(obj, dict):
            record = json_record(path, obj, field_name, "", codec, where="top-level object")
            return [record] if record is not None else []
        if not isinstance(obj, list):
            raise LoadError(path, f"json_text_field '{field_name}' needs an object or a list of objects")
        docs: list[Document] = []
        for index, item in enumerate(obj, start=1):
            if not isinstance(item, dict):
                raise LoadError(path, f"item {index}: expected an object, got {type(item).__name__}")
            record = json_record(
                path, item, field_name, f"i{index}", codec, where=f"item {index}", item=index
            )
            if record is not None:
                docs.append(record)
        return docs


class JsonLinesFormat:
    """``.jsonl``/``.ndjson``: one document per line."""

    binary = False

    def read(self, file: SourceFile, options: ReadOptions) -> list[Document]:
        """One document per non-empty line (see the module docstring)."""
        path = file.path
        text, codec = decode_data(path, file.data(), options.encoding)
        field_name = options.json_text_field
        docs: list[Document] = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LoadError(path, f"line {number}: invalid JSON: {exc.msg}") from exc
            locator = f"l{number}"
            if field_name is None:
                line_text = json.dumps(obj, ensure_ascii=False)
                docs.append(make_document(path, line_text, "json", locator, line=number, encoding=codec))
            elif not isinstance(obj, dict):
                raise LoadError(path, f"line {number}: expected an object, got {type(obj).__name__}")
            else:
                where = f"line {number}"
                record = json_record(path, obj, field_name, locator, codec, where=where, line=number)
                if record is not None:
                    docs.append(record)
        return docs


JSON = JsonFormat()
JSONL = JsonLinesFormat()
