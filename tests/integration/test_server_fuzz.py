"""The HTTP API fuzzed from its own OpenAPI schema (Schemathesis) over the in-process app on a small real index.

Every operation gets generated requests, schema-valid and not; every response must be no 5xx, show no stack
trace and no server file path, and conform to the schema (status code, content type, body, headers), and a
schema-valid request must be accepted (:func:`_accepted`: the few 4xx the schema cannot foresee are named
there).  Three runs over the same operations:

* no API keys configured (everyone is one caller);
* API keys configured and the key passed (Schemathesis also replays each successful call without a key and
  with a wrong one: its ``ignored_auth`` check);
* API keys configured, no key passed (generated, wrong credentials only): no non-public call succeeds, and
  every schema-valid one is 401.

Half the document ids, queries and tags generated are the seed documents' own, so reads, searches and
deletes hit real documents.  Schemathesis names every uploaded file "file" (always refused for its missing
extension), so :func:`test_fuzz_uploads` fuzzes real files (names, types, contents, titles, tags) with
Hypothesis.  Fuzzed deletes and uploads change the index: each test first re-uploads whatever of the seed
documents is missing.

Short by default (10 examples per operation and phase: about 1,800 requests, 25 s here); the long form is
``FINDERLEDGE_FUZZ_EXAMPLES=200 pytest -s tests/test_server_fuzz.py`` (not derandomized: each run explores
other inputs).  ``pytest -s`` prints the requests sent per operation and the statuses answered.

The five bugs the first runs found (a server path in results, a 405's Allow header, "5"/true accepted as
numbers, an undocumented 400, a valid chat over the body limit) are fixed; each has a regression test at the
end of this file.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

schemathesis = pytest.importorskip("schemathesis")
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig
from schemathesis.core.failures import Failure, FailureGroup

from finderledge import FinderLedge
from finderledge.server import ServerConfig, create_app
from finderledge.server.keys import KeyStore
from finderledge.server.models import ChatRequest, DocumentDetail, DocumentOut
from finderledge.server.routes import PUBLIC_PATHS

EXAMPLES = int(os.environ.get("FINDERLEDGE_FUZZ_EXAMPLES", "10"))
SRC = Path(__file__).resolve().parents[2] / "src"
REFUNDS = (
    "# Refunds\n\nA refund must be requested within 30 days of purchase. Refunds go to the original card.\n"
)
PASSWORDS = (
    "# Passwords\n\nReset a forgotten password from the sign-in page; the link expires after one hour.\n"
)
SEED = {  # filename -> (content, tags): a small real index, English and Japanese
    "refunds.md": (REFUNDS, "support,billing"),
    "返金.txt": ("返金の申請期限は購入から30日以内です。返金は元のカードに戻ります。\n", "ja"),
    "passwords.md": (PASSWORDS, "it"),
}
QUERIES = [
    "refund",
    "how long do I have to ask for a refund?",
    "password reset link",
    "返金の申請期限",
    "カード",
    "30 days",
    "original card",
]


COUNTS: dict[str, dict[str, Counter[int]]] = {}  # run -> operation -> status -> responses


@dataclass
class Served:
    app: Any
    ledger: FinderLedge
    directory: Path
    key: str | None  # the API key of tenant "alice" (None: no keys configured)


def _auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _seed(served: Served) -> list[str]:
    """Upload whichever seed file is not (or no longer) listed (a fuzzed DELETE may have removed it); the
    seed documents' ids."""
    with TestClient(served.app) as client:
        listed = client.get("/api/v1/documents", params={"per_page": 100}, headers=_auth(served.key))
        assert listed.status_code == 200, listed.text
        ids = {d["filename"]: d["id"] for d in listed.json()["items"]}
        for name, (text, tags) in SEED.items():
            if name not in ids:
                created = client.post(
                    "/api/v1/documents",
                    headers=_auth(served.key),
                    data={"tags": tags},
                    files={"file": (name, text.encode("utf-8"), "text/plain")},
                )
                assert created.status_code == 201, created.text
                ids[name] = created.json()["id"]
    return [ids[name] for name in SEED]


def _serve(tmp_path_factory: pytest.TempPathFactory, minilm: Any, *, keyed: bool) -> Iterator[Served]:
    directory = tmp_path_factory.mktemp("fuzz-keyed" if keyed else "fuzz") / "index"
    key = KeyStore(directory / "server").create("alice")[1] if keyed else None
    ledger = FinderLedge(directory, embedding=minilm, show_progress=False)
    yield Served(create_app(ServerConfig(directory=directory), ledger=ledger), ledger, directory, key)
    ledger.close()


@pytest.fixture(scope="module")
def open_app(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[Served]:
    yield from _serve(tmp_path_factory, minilm, keyed=False)


@pytest.fixture(scope="module")
def keyed_app(tmp_path_factory: pytest.TempPathFactory, minilm: Any) -> Iterator[Served]:
    yield from _serve(tmp_path_factory, minilm, keyed=True)


@pytest.fixture(scope="module", autouse=True)
def _report_counts() -> Iterator[None]:
    yield
    for run, ops in COUNTS.items():
        total = sum(sum(c.values()) for c in ops.values())
        print(f"\nfuzz run {run!r}: {total} requests ({EXAMPLES} examples per operation and phase)")
        for label, statuses in sorted(ops.items()):
            spread = ", ".join(f"{code}x{n}" for code, n in sorted(statuses.items()))
            print(f"  {sum(statuses.values()):5d}  {label:42s} {spread}")


def _schema(served: Served, *, send_key: bool) -> Any:
    ids = _seed(served)
    # Half the ids, queries and tags generated are real ones (so reads, deletes and searches hit documents);
    # the built-in checks replaced below by a tolerant wrapper or by _accepted are switched off.
    toml = f"""
[generation]
max-examples = {EXAMPLES}

[dictionaries.ids]
values = {json.dumps(ids)}
[dictionaries.tags]
values = {json.dumps(sorted({t for _, tags in SEED.values() for t in tags.split(",")}))}
[dictionaries.queries]
values = {json.dumps(QUERIES, ensure_ascii=False)}

[parameters]
"path.document_id" = {{ dictionary = "ids", probability = 0.5 }}
"body.document_ids[*]" = {{ dictionary = "ids", probability = 0.5 }}
"body.tags[*]" = {{ dictionary = "tags", probability = 0.5 }}
"body.query" = {{ dictionary = "queries", probability = 0.5 }}
"body.question" = {{ dictionary = "queries", probability = 0.5 }}

[checks.positive_data_acceptance]
enabled = false
[checks.negative_data_rejection]
enabled = false
[checks.status_code_conformance]
enabled = false
[checks.allow_header_conformance]
enabled = true
[checks.ignored_auth]
enabled = {str(served.key is not None and send_key).lower()}
"""
    if served.key is not None and send_key:
        toml += f'\n[auth.openapi.HTTPBearer]\nbearer = "{served.key}"\n'
    return schemathesis.openapi.from_asgi(
        "/openapi.json", served.app, config=SchemathesisConfig.from_str(toml)
    )


@pytest.fixture
def open_schema(open_app: Served) -> Any:
    return _schema(open_app, send_key=False)


@pytest.fixture
def keyed_schema(keyed_app: Served) -> Any:
    return _schema(keyed_app, send_key=True)


@pytest.fixture
def keyless_schema(keyed_app: Served) -> Any:
    return _schema(keyed_app, send_key=False)


# ---- checks ---------------------------------------------------------------------------------------------


def _text(response: Any) -> str:
    return response.content.decode("utf-8", errors="replace")


def _detail(response: Any) -> str:
    try:
        detail = json.loads(response.content).get("detail")
    except (ValueError, AttributeError):
        return ""
    return detail if isinstance(detail, str) else json.dumps(detail)


def _no_leak(served: Served) -> Callable[..., None]:
    markers = [
        "Traceback (most recent call last)",
        'File "/',
        str(SRC),
        str(served.directory),
        sys.prefix,
        "site-packages",
    ]

    def no_stack_trace_or_server_path(ctx: Any, response: Any, case: Any) -> None:
        text = _text(response)
        found = [m for m in markers if m in text]
        assert not found, f"the response shows {found!r}: {text[:400]}"

    return no_stack_trace_or_server_path


def _accepted(*, keyless: bool) -> Callable[..., None]:
    """A schema-valid request is accepted: 2xx (404 for an id that does not exist), 401 without a key.

    Allowed besides, because the schema cannot state them: an upload whose file has an unsupported extension,
    is empty or is not what its extension says (400, 415) or has too many/too long tags (422 "tags: ..."),
    and a search/chat whose ``filter`` is not a valid filter (the schema says "any object"; 422 "filter ...").
    """

    def schema_valid_request_accepted(ctx: Any, response: Any, case: Any) -> None:
        meta = case.meta
        if (
            meta is None
            or not meta.generation.mode.is_positive
            or case.method.upper() != case.operation.method.upper()
        ):
            return
        status, path, method = response.status_code, case.operation.path, case.operation.method.upper()
        if keyless and path not in PUBLIC_PATHS:
            allowed = {401}
        elif path in ("/api/v1/documents", "/api/v1/documents/upload") and method == "POST":
            allowed = {201, 400, 415} | ({422} if _detail(response).startswith("tags:") else set())
        elif path == "/api/v1/documents/{document_id}":
            allowed = {200, 204, 404}
        elif path in ("/api/v1/search", "/api/v1/chat", "/api/v1/chat/stream"):
            body = case.body if isinstance(case.body, dict) else {}
            allowed = {200} | (
                {422} if body.get("filter") and _detail(response).startswith("filter") else set()
            )
            if body.get("strategy") in ("multi_query", "hyde", "decompose", "deep_rag") and _detail(
                response
            ).startswith("strategy"):
                allowed.add(422)  # an LLM strategy on a server without --llm (the schema cannot say so)
        else:
            allowed = {200}
        assert status in allowed, (
            f"schema-valid request answered {status} (expected {sorted(allowed)}): {_text(response)[:300]}"
        )

    return schema_valid_request_accepted


def _tolerating(check: Callable[..., Any], known: Callable[[Failure, Any, Any], bool]) -> Callable[..., Any]:
    """``check``, with the failures ``known(failure, response, case)`` says are a known bug dropped."""

    def wrapped(ctx: Any, response: Any, case: Any) -> Any:
        try:
            return check(ctx, response, case)
        except FailureGroup as group:
            rest = [f for f in group.exceptions if not known(f, response, case)]
        except Failure as failure:
            rest = [] if known(failure, response, case) else [failure]
        if rest:
            raise rest[0]
        return None

    wrapped.__name__ = check.__name__
    return wrapped


def _not_negative(failure: Failure, response: Any, case: Any) -> bool:
    """A request Schemathesis meant as invalid but the server rightly accepted (or refused by size)."""
    message = str(failure.message)
    # ``tag`` is any list of strings: a query string can only carry strings, so whatever "invalid" value was
    # generated reached the server as valid tags (Schemathesis' own false positive).
    if "parameter `tag` in query" in message:
        return True
    return _too_large(
        response
    )  # refused (by size, before it was validated): 413 is not on Schemathesis' list


def _too_large(response: Any) -> bool:
    return response.status_code == 413 and _detail(response).startswith("request body larger than the limit")


def _checks(served: Served, *, keyless: bool = False) -> list[Callable[..., Any]]:
    return [
        _no_leak(served),
        _accepted(keyless=keyless),
        _tolerating(schemathesis.checks.negative_data_rejection, _not_negative),
        schemathesis.checks.status_code_conformance,
    ]


def _run(case: Any, served: Served, run: str, *, keyless: bool = False) -> Any:
    response = case.call_and_validate(additional_checks=_checks(served, keyless=keyless))
    COUNTS.setdefault(run, {}).setdefault(case.operation.label, Counter())[response.status_code] += 1
    assert response.status_code < 500, _text(response)[:500]  # not_a_server_error runs too; said plainly
    return response


FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize="FINDERLEDGE_FUZZ_EXAMPLES" not in os.environ,  # the long form explores
    suppress_health_check=list(HealthCheck),
)


def _nodeid_for_schemathesis() -> None:
    """pytest 9.2 keeps a node's id as ``Node._id`` (a NodeId) and dropped ``_nodeid``, which Schemathesis'
    ``from_fixture`` (4.32.5, the newest) still reads and rewrites to name each operation ("'Function' object has
    no attribute '_nodeid'"): give it back as a property over ``_id``. No-op on a pytest that has it."""
    from _pytest.nodes import Node

    if hasattr(Node, "_nodeid") or "_nodeid" in getattr(Node, "__slots__", ()):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # an older pytest: it sets _nodeid on each node itself
        return

    def get(node: Any) -> str:
        return str(node._id)

    def put(node: Any, value: str) -> None:
        node._id = coerce_node_id(value)

    Node._nodeid = property(get, put)  # type: ignore[attr-defined]


_nodeid_for_schemathesis()
open_api = schemathesis.pytest.from_fixture("open_schema")
keyed_api = schemathesis.pytest.from_fixture("keyed_schema")
keyless_api = schemathesis.pytest.from_fixture("keyless_schema")


@pytest.mark.slow
@open_api.parametrize()
@FUZZ_SETTINGS
def test_fuzz_without_keys(case: Any, open_app: Served) -> None:
    _run(case, open_app, "no keys")


@pytest.mark.slow
@keyed_api.parametrize()
@FUZZ_SETTINGS
def test_fuzz_with_a_key(case: Any, keyed_app: Served) -> None:
    _run(case, keyed_app, "keys, key sent")


@pytest.mark.slow
@keyless_api.parametrize()
@FUZZ_SETTINGS
def test_fuzz_keys_required_but_none_sent(case: Any, keyed_app: Served) -> None:
    """Nothing but the public paths answers 2xx; a schema-valid call is 401 (:func:`_accepted`).  A malformed
    body may be answered 400/422 before the key is looked at (FastAPI reads the body first): no data is shown."""
    response = _run(case, keyed_app, "keys, none sent", keyless=True)
    if case.operation.path not in PUBLIC_PATHS:
        assert not 200 <= response.status_code < 300, (
            case.operation.label,
            response.status_code,
            _text(response)[:300],
        )


@pytest.fixture
def client(open_app: Served) -> Iterator[TestClient]:
    _seed(open_app)
    with TestClient(open_app.app) as c:
        yield c


# ---- uploads: Schemathesis names every file "file" (always 400), so real files are fuzzed here ------------

_EXTS = [
    ".txt",
    ".md",
    ".markdown",
    ".csv",
    ".json",
    ".jsonl",
    ".html",
    ".htm",
    ".pdf",
    ".docx",
    ".exe",
    ".TXT",
    ".md.exe",
    "",
]
_MIMES = [
    "",
    "application/octet-stream",
    "text/plain",
    "text/markdown",
    "application/pdf",
    "application/json",
    "image/png",
    "text/plain; charset=shift_jis",
    "application/zip",
    "multipart/form-data",
]
_NAME_CHARS = st.characters(codec="utf-8")
_filenames = st.one_of(
    st.builds(lambda stem, ext: stem + ext, st.text(_NAME_CHARS, max_size=40), st.sampled_from(_EXTS)),
    st.sampled_from(
        [
            "../../etc/passwd.txt",
            "..\\..\\win.ini.txt",
            "/abs/path.md",
            "a/../../b.md",
            ".txt",
            "...",
            "CON.txt",
            "x" * 300 + ".txt",
            "名前 スペース.md",
            "null\x00byte.txt",
        ]
    ),
)
_contents = st.one_of(
    st.text(max_size=400).map(lambda t: t.encode("utf-8")),
    st.binary(max_size=400),
    st.text(min_size=1, max_size=200).map(lambda t: t.encode("utf-16")),
    st.text(max_size=200).map(lambda t: b"%PDF-1.4\n" + t.encode("utf-8", "replace")),
    st.binary(max_size=200).map(lambda b: b"PK\x03\x04" + b),
    st.sampled_from(
        [b"", b"   \n", "返金は30日以内".encode("shift_jis"), b'{"a": [1, 2, {"b": null}]}', b"a,b\n1,2\n"]
    ),
)
_tags = st.lists(st.text(max_size=120), max_size=60) | st.none()


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES * 4,
    deadline=None,
    database=None,
    derandomize="FINDERLEDGE_FUZZ_EXAMPLES" not in os.environ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    name=_filenames,
    content=_contents,
    mime=st.sampled_from(_MIMES),
    title=st.none() | st.text(max_size=600),
    tags=_tags,
)
def test_fuzz_uploads(
    client: TestClient,
    open_app: Served,
    name: str,
    content: bytes,
    mime: str,
    title: str | None,
    tags: list[str] | None,
) -> None:
    """Any file, name, declared type, title and tags: a clear 4xx, or a document that is listed, readable and
    stored inside the upload area; never a 5xx, a trace or a server path; nothing left behind when refused."""
    uploads = open_app.directory / "server" / "uploads"
    before = {p.name for p in uploads.iterdir()} if uploads.exists() else set()
    form: dict[str, Any] = {}
    if title is not None:
        form["title"] = title
    if tags is not None:
        form["tags"] = tags
    response = client.post("/api/v1/documents", files={"file": (name, content, mime)}, data=form)
    text = response.text
    COUNTS.setdefault("uploads", {}).setdefault("POST /api/v1/documents (files)", Counter())[
        response.status_code
    ] += 1
    for marker in ("Traceback", 'File "/', str(SRC), str(open_app.directory)):
        assert marker not in text, (name, response.status_code, text[:300])
    after = {p.name for p in uploads.iterdir()} if uploads.exists() else set()
    if response.status_code != 201:
        assert response.status_code in (400, 413, 415, 422), (name, mime, response.status_code, text[:300])
        assert isinstance(response.json()["detail"], (str, list)), text[:300]
        assert after == before, f"a refused upload left {after - before} in the upload area"
        return
    doc = DocumentOut.model_validate(response.json())
    assert after - before == {doc.id}
    stored = list((uploads / doc.id).iterdir())
    assert len(stored) == 1 and stored[0].name == doc.filename and "/" not in doc.filename, stored
    detail = client.get(f"/api/v1/documents/{doc.id}")
    assert detail.status_code == 200, detail.text[:300]
    full = DocumentDetail.model_validate(detail.json())
    assert full.chunk_count == len(full.chunks) and [c.chunk_index for c in full.chunks] == list(
        range(len(full.chunks))
    )
    assert client.delete(f"/api/v1/documents/{doc.id}").status_code == 204
    assert not (uploads / doc.id).exists()


# ---- the bugs the fuzz run found, fixed: their regression tests ------------------------------------------


def test_search_shows_no_server_path(client: TestClient, open_app: Served) -> None:
    response = client.post("/api/v1/search", json={"query": "refund", "top_k": 3})
    assert response.status_code == 200 and response.json()["results"]
    assert str(open_app.directory) not in response.text and "uploads/" not in response.text, response.text[
        :600
    ]


def test_405_allow_lists_every_method(client: TestClient) -> None:
    response = client.request("OPTIONS", "/api/v1/documents")
    assert response.status_code == 405
    assert {m.strip() for m in response.headers["allow"].split(",")} == {"GET", "POST"}, response.headers[
        "allow"
    ]


@pytest.mark.parametrize("body", [{"top_k": "5"}, {"top_k": True}, {"score_threshold": False}])
def test_wrong_types_are_rejected(client: TestClient, body: dict[str, Any]) -> None:
    response = client.post("/api/v1/search", json={"query": "refund", **body})
    assert response.status_code == 422, (body, response.status_code)


def test_unparseable_body_status_is_documented(client: TestClient) -> None:
    response = client.post("/api/v1/search", content=b"\xff", headers={"Content-Type": "application/json"})
    documented = client.get("/openapi.json").json()["paths"]["/api/v1/search"]["post"]["responses"]
    assert str(response.status_code) in documented, (response.status_code, response.text, sorted(documented))


def test_the_largest_valid_chat_is_accepted(client: TestClient) -> None:
    history = [{"role": "user", "content": "é" * 4_000}] * 20  # at the ChatTurn/ChatRequest limits
    body = {"question": "refund", "history": history}
    assert ChatRequest.model_validate(body)
    response = client.post("/api/v1/chat", json=body)
    documented = client.get("/openapi.json").json()["paths"]["/api/v1/chat"]["post"]["responses"]
    assert response.status_code == 200, (response.status_code, response.text[:200])
    assert "413" in documented
