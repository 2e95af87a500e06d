"""``/api/v1/documents``: upload a file (one document id for all its pages/rows), list, inspect, delete."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from typing import Annotated, Any

from fastapi import APIRouter, File, Form, HTTPException, Query, Response, UploadFile
from langchain_core.documents import Document

from ...errors import AccessDeniedError, LoadError, TooManyChunksError
from ...metadata import DOCUMENT_ID, info_of, user_metadata
from ..deps import TENANT_FIELD, CallerDep, StateDep
from ..jobs import IndexJob
from ..listing import display_names, document_page, group_documents
from ..models import ChunkOut, DocumentDetail, DocumentList, DocumentOut, ErrorOut
from ..uploads import UploadError

__all__ = ["router"]

logger = logging.getLogger(__name__)
router = APIRouter(
    prefix="/api/v1/documents",
    tags=["documents"],
    responses={401: {"model": ErrorOut}, 422: {"model": ErrorOut}},
)

MAX_TAGS = 50
DATASET_ID = "dataset_id"  # metadata: the dataset a file was uploaded to (filter: dataset_ids)
DATA_SOURCE_ID = "data_source_id"  # metadata: the uploaded file's id (filter: data_source_ids)
MAX_TAG_CHARS = 100


def _tags(raw: list[str] | None) -> list[str]:
    """Tags from repeated fields and/or comma-separated values, each once, in order."""
    out: dict[str, None] = {}
    for item in raw or []:
        for tag in item.split(","):
            tag = tag.strip()
            if tag:
                if len(tag) > MAX_TAG_CHARS:
                    raise HTTPException(422, f"tags: a tag is longer than {MAX_TAG_CHARS} characters")
                out.setdefault(tag, None)
    if len(out) > MAX_TAGS:
        raise HTTPException(422, f"tags: more than {MAX_TAGS} tags")
    return list(out)


def tag_filter(tags: list[str] | None) -> dict[str, Any] | None:
    """Documents with any of ``tags``."""
    tags = [t for t in tags or [] if t]
    if not tags:
        return None
    clauses = [{"tags": {"$contains": t}} for t in tags]
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def stored_name(document_id: str, filename: str) -> str:
    """Where an upload is kept, relative to the upload area (the design's ``file_path``; never a server path)."""
    return f"{document_id}/{filename}"


def _summary(document_id: str, parents: list[Document]) -> dict[str, Any]:
    """A :class:`DocumentOut` from the parents stored under one document id (an upload, or a document the CLI
    or the library added: titled from its title, else its file's name, else its text)."""
    md = parents[0].metadata
    tags = md.get("tags")
    filename, title = display_names(md, parents[0].page_content)
    uploaded = isinstance(md.get(DATA_SOURCE_ID), str)
    source_id = md.get("source_id")
    return {
        "id": document_id,
        "filename": filename,
        "title": title,
        "mime_type": str(md.get("mime_type") or ""),
        "size": int(md.get("size") or 0),
        "file_size": int(md.get("size") or 0),
        "file_path": stored_name(document_id, filename)
        if uploaded
        else (source_id if isinstance(source_id, str) else filename),
        "tags": [str(t) for t in tags] if isinstance(tags, list) else [],
        "dataset_id": md.get(DATASET_ID) if isinstance(md.get(DATASET_ID), str) else None,
        "data_source_id": document_id,
        "status": "indexed",
        "parts": len(parents),
        "chunk_count": sum(int(info_of(p.metadata).get("split_count") or 0) for p in parents),
        "created_at": str(md.get("uploaded_at") or ""),
        "updated_at": str(md.get("uploaded_at") or ""),
    }


def _parents(state: StateDep, caller: CallerDep, ids: list[str]) -> dict[str, list[Document]]:
    """The caller's parents of each document id, grouped (ids the caller cannot see are absent); an id of a
    document added without one (by the CLI or the library: see :mod:`..listing`) is found among every
    document."""
    found = state.ledger.list_documents(filter=caller.narrow({DOCUMENT_ID: {"$in": ids}}))
    grouped: dict[str, list[Document]] = defaultdict(list)
    for doc in found:
        grouped[doc.metadata[DOCUMENT_ID]].append(doc)
    missing = set(ids) - set(grouped)
    if missing:
        every = group_documents(state.ledger.list_documents(filter=caller.narrow()))
        grouped.update({key: every[key] for key in missing if key in every})
    return grouped


@router.post(
    "",
    status_code=201,
    response_model=DocumentOut,
    summary="Upload a file",
    responses={400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 415: {"model": ErrorOut}},
)
@router.post(
    "/upload",
    status_code=201,
    response_model=DocumentOut,
    summary="Upload a file (the document-search design's path; the same as POST /api/v1/documents)",
    responses={400: {"model": ErrorOut}, 413: {"model": ErrorOut}, 415: {"model": ErrorOut}},
    operation_id="upload_document_design_path",
)
def upload(
    state: StateDep,
    caller: CallerDep,
    file: Annotated[UploadFile, File(description="PDF, DOCX, text, Markdown, HTML, CSV or JSON")],
    title: Annotated[str | None, Form(max_length=500)] = None,
    tags: Annotated[list[str] | None, Form(description="tags, repeated or comma-separated")] = None,
    dataset_id: Annotated[
        str | None,
        Form(
            pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$",
            description="the dataset it belongs to (search and chat narrow to it with dataset_ids)",
        ),
    ] = None,
) -> dict[str, Any]:
    """Store the file under a new document id and index it (its pages/rows share the id)."""
    tag_list = _tags(tags)
    try:
        stored = state.uploads.receive(file.file, file.filename, file.content_type)
    except UploadError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    metadata = {
        "filename": stored.filename,
        "title": (title or "").strip() or stored.filename,
        "mime_type": stored.mime_type,
        "size": stored.size,
        "tags": tag_list,
        "uploaded_at": now,
        DATA_SOURCE_ID: stored.document_id,
        **({DATASET_ID: dataset_id} if dataset_id else {}),
        **caller.stamp(),
    }
    record = {
        "id": stored.document_id,
        "tenant": caller.tenant,
        "filename": stored.filename,
        "title": metadata["title"],
        "mime_type": stored.mime_type,
        "size": stored.size,
        "tags": tag_list,
        "dataset_id": dataset_id,
        "created_at": now,
    }

    def index() -> Any:
        report = state.ledger.ingest(
            stored.path,
            metadata,
            document_id=stored.document_id,
            on_error="raise",
            max_chunks=state.config.max_chunks,
            within=caller.policy.scope,  # never replaces another tenant's document
        )
        if not report.ids:
            reason = report.skipped[0][1] if report.skipped else "no text found"
            raise _NothingIndexed(f"nothing could be indexed from {stored.filename!r}: {reason}")
        return report

    def describe(exc: BaseException) -> str:
        if isinstance(exc, LoadError):
            return f"{stored.filename!r} could not be read: {str(exc).replace(str(stored.path), stored.filename)}"
        if isinstance(exc, (_NothingIndexed, AccessDeniedError)):
            return str(exc)
        if isinstance(exc, TooManyChunksError):
            return (
                f"{stored.filename!r} splits into more than {exc.limit} chunks, over the limit of {exc.limit} "
                "(server setting max_chunks; raise it with 'finderledge serve --max-chunks' to accept such "
                "files)"
            )
        return f"indexing failed ({type(exc).__name__}); the server log has the details"

    job = state.jobs.submit(IndexJob(stored.document_id, record, index, describe))
    if not job.done.wait(state.config.index_wait):  # indexed in the background: the client polls its status
        return _pending({**record, "status": "processing"})
    if job.error is not None:  # failed within the wait: answered now, nothing kept
        state.jobs.forget(stored.document_id)
        if isinstance(job.error, (LoadError, _NothingIndexed)):
            raise HTTPException(400, f"file: {describe(job.error)}") from None
        if isinstance(job.error, TooManyChunksError):
            raise HTTPException(413, f"file: {describe(job.error)}") from None
        raise job.error
    parents = _parents(state, caller, [stored.document_id]).get(stored.document_id)
    if not parents:  # removed by a concurrent delete between the write and this read
        raise HTTPException(409, "the document was deleted while it was being uploaded")
    return _summary(stored.document_id, parents)


class _NothingIndexed(Exception):
    """The file held no text to index."""


def _pending(record: dict[str, Any]) -> dict[str, Any]:
    """A :class:`DocumentOut` for an upload not (yet) indexed: ``processing`` or ``failed`` with the reason."""
    filename = str(record.get("filename") or "")
    return {
        "id": record["id"],
        "filename": filename,
        "title": str(record.get("title") or record.get("filename") or ""),
        "mime_type": str(record.get("mime_type") or ""),
        "size": int(record.get("size") or 0),
        "file_size": int(record.get("size") or 0),
        "file_path": stored_name(record["id"], filename),
        "tags": [str(t) for t in record.get("tags") or []],
        "dataset_id": record.get("dataset_id"),
        "data_source_id": record["id"],
        "status": record.get("status", "processing"),
        "reason": record.get("reason"),
        "parts": 0,
        "chunk_count": 0,
        "created_at": str(record.get("created_at") or ""),
        "updated_at": str(record.get("created_at") or ""),
    }


def _jobs_of(state: StateDep, caller: CallerDep) -> list[dict[str, Any]]:
    """The caller's uploads that are not indexed: being indexed, or failed."""
    return [r for r in state.jobs.records() if r.get("tenant") == caller.tenant]


@router.get("", response_model=DocumentList, summary="List documents")
def list_documents(
    state: StateDep,
    caller: CallerDep,
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
    per_page: Annotated[int, Query(ge=1, le=100)] = 20,
    tag: Annotated[list[str] | None, Query(description="only documents with any of these tags")] = None,
    dataset_id: Annotated[
        list[str] | None, Query(description="only documents uploaded to any of these datasets")
    ] = None,
) -> dict[str, Any]:
    """The caller's documents, however they were added (uploaded, or by the CLI or the library), in the order
    they were added, a page at a time."""
    datasets = {DATASET_ID: {"$in": dataset_id}} if dataset_id else None
    start = (page - 1) * per_page
    ids, every_parent = document_page(
        state.ledger, caller.narrow(tag_filter(tag), datasets), start, start + per_page
    )
    indexed = set(ids)
    pending = {
        r["id"]: r
        for r in _jobs_of(state, caller)
        if r["id"] not in indexed
        and (not tag or set(tag) & set(r.get("tags") or []))
        and (not dataset_id or r.get("dataset_id") in dataset_id)
    }
    every = ids + list(pending)  # uploads not indexed yet (or failed) come last
    chosen = every[start : start + per_page]
    grouped = {i: every_parent[i] for i in chosen if i in every_parent}
    items = [
        _summary(i, grouped[i]) if i in grouped else _pending(pending[i])
        for i in chosen
        if i in grouped or i in pending
    ]
    return {"items": items, "total": len(every), "page": page, "per_page": per_page}


@router.get(
    "/{document_id}",
    response_model=DocumentDetail,
    summary="A document and its chunks",
    responses={404: {"model": ErrorOut}},
)
def get_document(state: StateDep, caller: CallerDep, document_id: str) -> dict[str, Any]:
    """One document with its chunks in reading order (page/row and position)."""
    parents = _parents(state, caller, [document_id]).get(document_id)
    if not parents:
        record = next((r for r in _jobs_of(state, caller) if r["id"] == document_id), None)
        if record is None:
            raise HTTPException(404, f"no document {document_id!r}")
        return {**_pending(record), "chunks": []}
    summary = _summary(document_id, parents)
    chunks: list[dict[str, Any]] = []
    for parent in parents:
        for chunk in state.ledger.get_split_documents(str(parent.id)):
            info = info_of(chunk.metadata)
            page, row = chunk.metadata.get("page"), chunk.metadata.get("row")
            page = page if isinstance(page, int) and not isinstance(page, bool) else None
            chunks.append(
                {
                    "id": info["id"],
                    "document_id": document_id,
                    "chunk_id": info["id"],
                    "chunk_index": len(chunks),
                    "split_index": info["split_index"],
                    "page": page,
                    "page_number": page,
                    "row": row if isinstance(row, int) else None,
                    "content": chunk.page_content,
                    "chunk_metadata": _own_metadata(chunk.metadata),
                    "created_at": summary["created_at"],
                }
            )
    return {**summary, "chunks": [ChunkOut(**c) for c in chunks]}


def _own_metadata(md: dict[str, Any]) -> dict[str, Any] | None:
    """What the loader found about a chunk (its page or row, language, …): not the upload's fields, which the
    document shows, nor where the server keeps the file; ``None`` when nothing is left."""
    own = {k: v for k, v in user_metadata(md).items() if k not in _NOT_CHUNK_METADATA}
    return own or None


# the upload's own fields (shown on the document) and where the server keeps the file (never shown)
_NOT_CHUNK_METADATA = frozenset(
    {"filename", "title", "mime_type", "size", "tags", "uploaded_at", TENANT_FIELD}
    | {"source", "source_id", DOCUMENT_ID}
)


@router.delete(
    "/{document_id}",
    status_code=204,
    summary="Delete a document",
    response_class=Response,
    responses={404: {"model": ErrorOut}},
)
def delete_document(state: StateDep, caller: CallerDep, document_id: str) -> Response:
    """Remove the document from every store and its file from the upload area."""
    parents = _parents(state, caller, [document_id]).get(document_id)
    if not parents:
        record = next((r for r in _jobs_of(state, caller) if r["id"] == document_id), None)
        if record is None:
            raise HTTPException(404, f"no document {document_id!r}")
        if record.get("status") == "processing":
            raise HTTPException(409, "the document is still being indexed; delete it once it is indexed")
        state.jobs.forget(document_id)
        state.uploads.discard(document_id)
        return Response(status_code=204)
    state.ledger.delete([str(p.id) for p in parents], within=caller.policy.scope)
    state.uploads.discard(document_id)
    return Response(status_code=204)
