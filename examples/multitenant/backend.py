"""MochiRAG's backend: FinderLedge's server (JWT tenants, uploads into datasets, strategies) plus the design's
login (``POST /token``), sign-up (``POST /users/``) and LCEL chat (``POST /chat/query/``).

Run:  MOCHIRAG_JWT_SECRET=<32+ characters> LLM=openai:<model> LLM_BASE_URL=http://127.0.0.1:8080/v1 \\
      python examples/multitenant/backend.py --dir ./mochirag-index --port 8000
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import logging
import os
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import jwt
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.security import OAuth2PasswordRequestForm
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))  # core/, when run as a script or loaded by a test

from core.managers import CONFIG, LLMManager, Settings
from core.rag_chain import get_rag_response
from core.retriever_manager import RetrieverManager

from finderledge import ConfigurationError, FinderLedgeError
from finderledge.errors import MissingExtraError
from finderledge.server import ServerConfig, create_app
from finderledge.server.deps import CallerDep
from finderledge.server.keys import TENANT_PATTERN

TOKEN_SECONDS = 60 * 60
USERS_FILE = "users.json"
PBKDF2_ROUNDS = 100_000
logger = logging.getLogger("mochirag")
_LLM_ONLY = frozenset({"multi_query", "deep_rag", "hyde"})  # the strategies that need the LLM


class UserStore:
    """Users and their salted PBKDF2-SHA256 password hashes in ``<index>/server/users.json`` (never passwords)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _read(self) -> dict[str, dict[str, str]]:
        return json.loads(self.path.read_text(encoding="utf-8")) if self.path.exists() else {}

    @staticmethod
    def _hash(password: str, salt: str) -> str:
        return hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), PBKDF2_ROUNDS).hex()

    def create(self, username: str, password: str) -> bool:
        """Add a user; False when the name is taken."""
        with self._lock:
            users = self._read()
            if username in users:
                return False
            salt = secrets.token_hex(16)
            users[username] = {"salt": salt, "hash": self._hash(password, salt)}
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(users), encoding="utf-8")
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.path)
            return True

    def check(self, username: str, password: str) -> bool:
        user = self._read().get(username)
        if user is None:
            self._hash(password, "00" * 16)  # the same time whether or not the user exists
            return False
        return hmac.compare_digest(user["hash"], self._hash(password, user["salt"]))


class UserIn(BaseModel):
    username: str = Field(pattern=TENANT_PATTERN.pattern)
    password: str = Field(min_length=8, max_length=200)


class QueryIn(BaseModel):
    """The design's chat request: the question, the chosen strategy and datasets (the user comes from the JWT)."""

    question: str = Field(min_length=1, max_length=4000)
    strategy: str | None = None
    dataset_ids: list[str] | None = Field(None, max_length=100)
    data_source_ids: list[str] | None = Field(None, max_length=1000)


class Mochi:
    """What the design's routes need: the users, the token secret, the settings and the retriever manager."""

    def __init__(
        self,
        users: UserStore,
        secret: str,
        settings: Settings,
        manager: RetrieverManager,
        llm: LLMManager | None = None,
    ) -> None:
        self.users = users
        self.secret = secret
        self.settings = settings
        self.manager = manager
        self.llm_spec = llm.spec if llm is not None else None  # named in a model failure's message
        self.llm_base_url = llm.base_url if llm is not None else None


def get_mochi(request: Request) -> Mochi:
    mochi: Mochi = request.app.state.mochirag
    return mochi


MochiDep = Annotated[Mochi, Depends(get_mochi)]
router = APIRouter(tags=["mochirag"])


@router.post("/users/", status_code=201, summary="Sign up")
def sign_up(mochi: MochiDep, body: UserIn) -> dict[str, str]:
    if not mochi.users.create(body.username, body.password):
        raise HTTPException(409, f"the user name {body.username!r} is taken")
    return {"username": body.username}


@router.post("/token", summary="Log in: a bearer JWT for the user")
def login(mochi: MochiDep, form: Annotated[OAuth2PasswordRequestForm, Depends()]) -> dict[str, str]:
    if not mochi.users.check(form.username, form.password):
        raise HTTPException(401, "wrong user name or password", headers={"WWW-Authenticate": "Bearer"})
    now = int(time.time())
    token = jwt.encode({"sub": form.username, "iat": now, "exp": now + TOKEN_SECONDS}, mochi.secret, "HS256")
    return {"access_token": token, "token_type": "bearer"}


@router.get("/users/me", summary="Who the token names")
def me(caller: CallerDep) -> dict[str, str | None]:
    return {"username": caller.tenant}


@router.get("/chat/strategies/", summary="The strategies config/strategies.yaml offers")
def strategies(mochi: MochiDep, caller: CallerDep) -> dict[str, Any]:
    llm = mochi.manager.llm is not None
    return {
        "default": mochi.settings.default_strategy,
        "strategies": [
            {"name": s.name, "description": s.description, "available": llm or s.name not in _LLM_ONLY}
            for s in mochi.settings.strategies.values()
        ],
    }


NO_LLM = (
    "no language model is configured, and /chat/query/ answers through one (the design's LCEL chain): set "
    "llm.provider and llm.model (and llm.base_url for an OpenAI-protocol server) in config/strategies.yaml, or "
    "the LLM environment variable (LLM=openai:<model> with LLM_BASE_URL=http://<host>:<port>/v1, or "
    "LLM=ollama:<model>), then restart the backend. Without a model, POST /api/v1/search finds the passages and "
    "POST /api/v1/chat answers with them (an extractive answer)"
)


def model_failure(mochi: Mochi, exc: Exception) -> HTTPException:
    """A 502 naming the model, where it was looked for, what failed and which settings to check."""
    where = f" at {mochi.llm_base_url}" if mochi.llm_base_url else ""
    kind = type(exc).__name__
    unreachable = any(
        word in c.__name__.lower() for c in type(exc).__mro__ for word in ("connect", "timeout")
    )
    what = "could not be reached" if unreachable else "failed"
    logger.warning("the language model %s%s %s: %s: %s", mochi.llm_spec, where, what, kind, exc)
    return HTTPException(
        502,
        f"the language model {mochi.llm_spec}{where} {what} ({kind}: {str(exc)[:300]}); check that its server "
        "is running and that LLM / LLM_BASE_URL (or llm.provider, llm.model and llm.base_url in "
        "config/strategies.yaml) name it",
    )


@router.post(
    "/chat/query/",
    summary="Answer from the user's documents through a strategy (LCEL chain)",
    responses={
        502: {
            "description": "the language model could not be reached or failed (the reason and the settings)"
        },
        503: {"description": "no language model is configured (which settings to set)"},
    },
)
def chat_query(mochi: MochiDep, caller: CallerDep, body: QueryIn) -> dict[str, Any]:
    """The design's data flow: JWT → user → RetrieverManager.get_retriever → LCEL chain → answer + sources."""
    if mochi.manager.llm is None:
        raise HTTPException(503, NO_LLM)
    strategy = body.strategy or mochi.settings.default_strategy
    try:
        response = get_rag_response(
            mochi.manager, body.question, strategy, caller.base_filter, body.dataset_ids, body.data_source_ids
        )
    except ConfigurationError as exc:
        raise HTTPException(422, str(exc)) from None
    except FinderLedgeError:
        raise  # the index's own errors: the server's handlers answer them
    except Exception as exc:  # noqa: BLE001 - the model's client raises its own kinds
        raise model_failure(mochi, exc) from None
    return {"question": body.question, "strategy": strategy, **response}


def create_backend(
    directory: str | os.PathLike[str],
    *,
    secret: str | None = None,
    settings_path: str | os.PathLike[str] = CONFIG,
) -> FastAPI:
    """FinderLedge's server over ``directory`` in JWT mode, with the design's routes added."""
    settings = Settings.load(settings_path)
    secret = secret or os.environ.get("MOCHIRAG_JWT_SECRET")
    if not secret:
        raise ConfigurationError("MOCHIRAG_JWT_SECRET: set a secret of 32+ characters to sign login tokens")
    llm = LLMManager(settings)
    config = ServerConfig(
        directory=Path(directory),
        jwt_secret=secret,
        llm=llm.spec,
        llm_base_url=llm.base_url,
        embedding=settings.embedding,
        vector_store=settings.vector_store,
        extra=settings.server_settings(),
    )
    app = create_app(config)
    manager = RetrieverManager(settings, app.state.finderledge.ledger, llm.get_llm())
    users = UserStore(config.server_dir / USERS_FILE)
    app.state.mochirag = Mochi(users, secret, settings, manager, llm)
    app.include_router(router)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default="./mochirag-index", help="the index directory")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--config", default=str(CONFIG), help="strategies.yaml")
    args = parser.parse_args(argv)
    import uvicorn

    try:
        app = create_backend(args.dir, settings_path=args.config)
    except (ConfigurationError, MissingExtraError) as exc:  # a setting, or an LLM client not installed
        print(f"error: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
