"""Settings for FinderLedge, resolved as: arguments > ``FINDERLEDGE_*`` environment > ``.env`` > defaults.

Each setting is declared once below with its default and its rule; every value, whatever its origin
(argument, environment, ``.env`` file, a reopened directory's recorded settings), passes that rule, and
a bad one raises :class:`~finderledge.errors.ConfigurationError` (a ``ValueError``) naming the setting,
what was expected and where the value came from.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from dotenv import dotenv_values

from .env_names import warn_unknown_variables
from .errors import ConfigurationError
from .scripts import KNOWN_SCRIPTS, parse_scripts

__all__ = [
    "ANY_SCRIPTS",
    "CHUNK_UNITS",
    "ENV_PREFIX",
    "FUSIONS",
    "PINNED_SETTINGS",
    "RECORDED_SETTINGS",
    "RERANKER_ON_ERROR",
    "SEARCH_MODES",
    "SECRET_SETTINGS",
    "VECTOR_INDEXES",
    "VECTOR_STORES",
    "SearchMode",
    "Settings",
    "check_setting",
    "redact_url",
]

ENV_PREFIX = "FINDERLEDGE_"
VECTOR_STORES = ("chroma", "faiss", "pgvector", "qdrant")  # built in; vector_stores.register adds more
# the FAISS store's search structure: flat is exact; the others (docs/scaling.md) search an approximate index
VECTOR_INDEXES = ("flat", "hnsw", "ivf", "ivf_sq8", "ivf_pq")
SECRET_SETTINGS = (
    "database_url",
    "chroma_url",
    "qdrant_url",
)  # may hold a password: never shown, logged or recorded whole
SearchMode = Literal["hybrid", "vector", "keyword"]  # the one list of search modes
SEARCH_MODES: tuple[str, ...] = get_args(SearchMode)
FUSIONS = ("adaptive", "relative_score", "rrf", "dbsf")
CHUNK_UNITS = ("weighted", "chars")  # weighted: Latin-character equivalents (a CJK character counts 3)
RERANKER_ON_ERROR = ("warn", "raise")  # a reranker that fails: searches keep the fused order, or raise
ANY_SCRIPTS = ("any", "*", "")  # vector_scripts values meaning "the model reads every script"
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
NONE_WORDS = ("auto", "none")  # show_progress: decide from the terminal


@dataclass(frozen=True)
class Rule:
    """What a setting accepts: a type (``bool``, ``int``, ``float``, ``str``), a test and its description."""

    kind: type
    expected: str
    test: Callable[[Any], bool] = lambda value: True
    optional: bool = False  # None is a valid value


def _setting(default: Any, rule: Rule, *, recorded: bool = False, pinned: bool = False) -> Any:
    """A dataclass field carrying its rule and whether a persist directory records it when created
    (``recorded``) and keeps the recorded value when reopened unless an argument says otherwise (``pinned``)."""
    if pinned and not recorded:
        raise ValueError("a pinned setting must be recorded")
    return field(default=default, metadata={"rule": rule, "recorded": recorded, "pinned": pinned})


KEYWORD_INDEXES = ("local", "engine")


def _one_of(allowed: tuple[str, ...]) -> Rule:
    """Rule of a setting that takes one of a few names."""
    return Rule(str, f"one of {list(allowed)}", lambda value: value in allowed)


def _known_backend(value: str) -> bool:
    from .vector_stores import backend_names

    return value in backend_names()


def _postgres_url(value: str) -> bool:
    """A libpq URL, or SQLAlchemy's form with a driver (``postgresql+psycopg://``), which the connection drops."""
    return re.match(r"(?i)postgres(?:ql)?(?:\+[a-z0-9_]+)?://", value) is not None


def _identifier(value: str) -> bool:
    return bool(re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", value))


def _scripts_ok(value: str) -> bool:
    """Whether ``value`` is ``auto``, ``any`` or a comma-separated list of known scripts (as Finder reads it)."""
    if value == "auto" or value in ANY_SCRIPTS:
        return True
    scripts = parse_scripts(value, ANY_SCRIPTS)
    return bool(scripts) and scripts <= KNOWN_SCRIPTS


POSITIVE_INT = Rule(int, "an integer >= 1", lambda value: value >= 1)
NON_NEGATIVE_INT = Rule(int, "an integer >= 0", lambda value: value >= 0)
NON_NEGATIVE = Rule(float, "a finite number >= 0", lambda value: math.isfinite(value) and value >= 0)
OPTIONAL_WEIGHT = Rule(float, "a finite number >= 0 (or unset: adaptive)", NON_NEGATIVE.test, optional=True)
FRACTION = Rule(float, "a number in [0, 1]", lambda value: 0.0 <= value <= 1.0)  # NaN fails both comparisons
NAME = Rule(str, "a non-empty string", lambda value: value != "", optional=True)
SCRIPTS = Rule(str, f"'auto', 'any' or a comma-separated list of {sorted(KNOWN_SCRIPTS)}", _scripts_ok)
SECONDS = Rule(float, "a finite number of seconds (a negative one waits forever)", math.isfinite)
BACKEND = Rule(
    str, f"one of {list(VECTOR_STORES)} (or a name given to vector_stores.register)", _known_backend
)
DATABASE_URL = Rule(
    str,
    "a postgresql://user:password@host:port/dbname URL (postgresql+psycopg://… accepted)",
    _postgres_url,
    optional=True,
)
IDENTIFIER = Rule(str, "a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 characters)", _identifier)
PARTITION_KEY = Rule(
    str,
    "a metadata key (a non-empty string not starting with '$' and not '_finderledge') or unset",
    lambda value: value != "" and not value.startswith("$") and value != "_finderledge",
    optional=True,
)
BOOLEAN = Rule(bool, f"a boolean ({'/'.join(TRUE_WORDS)}, {'/'.join(FALSE_WORDS)})")
FLAG = Rule(bool, f"a boolean ({'/'.join(TRUE_WORDS)}, {'/'.join(FALSE_WORDS)}) or auto", optional=True)


@dataclass(frozen=True)
class Settings:
    """Every tunable of a FinderLedge instance, validated.  Build it with :meth:`resolve`."""

    persist_directory: str | None = _setting(None, NAME)  # None: in memory
    # of a new directory (a reopened one keeps its own); chroma: finderledge[chroma]; pgvector: database_url
    vector_store: str = _setting("faiss", BACKEND, recorded=True, pinned=True)
    # PostgreSQL holding the ledger and the vectors (pgvector), shared by every machine; None: a local ledger
    database_url: str | None = _setting(None, DATABASE_URL)
    database_schema: str = _setting(
        "finderledge", IDENTIFIER
    )  # the Postgres schema holding the index's tables
    # a Chroma server (http://host:port) instead of local files, and its collection (one per index)
    chroma_url: str | None = _setting(None, NAME, recorded=True, pinned=True)
    chroma_collection: str = _setting("finderledge", NAME, recorded=True, pinned=True)
    # a Qdrant server (http://host:6333; None: local mode), and its collection (one per index)
    qdrant_url: str | None = _setting(None, NAME, recorded=True, pinned=True)
    qdrant_collection: str = _setting("finderledge", NAME, recorded=True, pinned=True)
    embedding_model: str | None = _setting(None, NAME, recorded=True)  # None: the offline MiniLM model
    chunk_size: int = _setting(1000, POSITIVE_INT, recorded=True, pinned=True)
    chunk_overlap: int = _setting(100, NON_NEGATIVE_INT, recorded=True, pinned=True)  # and below chunk_size
    # what chunk_size/chunk_overlap count
    chunk_unit: str = _setting("weighted", _one_of(CHUNK_UNITS), recorded=True, pinned=True)
    # each chunk embedded and BM25-indexed with its parent's title and heading path above it (results show the
    # chunk's own text); switched only by reindex, since every chunk is embedded again
    chunk_context: bool = _setting(False, BOOLEAN, recorded=True, pinned=True)
    # how the FAISS store searches a large corpus (docs/scaling.md, "pick this when"): flat (exact), or an
    # approximate index (hnsw, ivf, ivf_sq8, ivf_pq) built from 20,000 vectors; switched only by reindex
    vector_index: str = _setting("flat", _one_of(VECTOR_INDEXES), recorded=True, pinned=True)
    search_mode: str = _setting("hybrid", _one_of(SEARCH_MODES))
    k: int = _setting(10, POSITIVE_INT)
    candidate_k: int = _setting(100, POSITIVE_INT)  # candidates each leg fetches before fusion
    fusion: str = _setting(
        "adaptive", _one_of(FUSIONS)
    )  # adaptive: leg weights from evidence; docs/evaluation.md
    rrf_k: int = _setting(60, POSITIVE_INT)
    # fixed leg weights (not both 0); None: adaptive fusion sets them per query, the other fusions use 1.0
    vector_weight: float | None = _setting(None, OPTIONAL_WEIGHT)
    keyword_weight: float | None = _setting(None, OPTIONAL_WEIGHT)
    bm25_k1: float = _setting(0.9, NON_NEGATIVE)  # keyword leg's BM25 parameters (Anserini's); query-time
    bm25_b: float = _setting(0.4, FRACTION)
    embedding_batch_size: int = _setting(64, POSITIVE_INT)
    vector_scripts: str = _setting(
        "auto", SCRIPTS
    )  # scripts the embedding model reads: auto (from its name), ...
    min_vector_share: float = _setting(
        0.5, FRACTION
    )  # hybrid skips the vector leg below this share of the query
    show_progress: bool | None = _setting(None, FLAG)  # None: only when stderr is a terminal
    lock_timeout: float = _setting(120.0, SECONDS)  # seconds a write waits for another process's write lock
    # a metadata key whose values are partitions with their own statistics (finderledge.partitions); None: one corpus
    partition_key: str | None = _setting(None, PARTITION_KEY, recorded=True)
    # where the keyword leg scores BM25: "local" (this process's replica of the index) or "engine" (postings the
    # PostgreSQL ledger keeps in its transactions with database_url, or sparse vectors in Qdrant with
    # vector_store="qdrant"; docs/scaling.md says when to pick which); recorded: a reopened index (check --repair
    # included) searches the leg it was built with unless told otherwise, and a different one given is recorded
    keyword_index: str = _setting("local", _one_of(KEYWORD_INDEXES), recorded=True)
    # the reranker (the ``reranker`` argument) rescores the fused top rerank_candidates of each search; one
    # that fails to load or score warns and searches keep the fused order ("raise": the error is raised)
    rerank_candidates: int = _setting(20, POSITIVE_INT)
    reranker_on_error: str = _setting("warn", _one_of(RERANKER_ON_ERROR))

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            object.__setattr__(self, f.name, _check(f.name, _strict(f.name, value), None))
        _check_together(self.__dict__, {})

    @classmethod
    def resolve(
        cls,
        arguments: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
        env_file: str | os.PathLike[str] | None = ".env",
        defaults: Mapping[str, Any] | None = None,
    ) -> Settings:
        """Merge arguments (non-``None`` ones win), environment variables, a ``.env`` file and defaults.

        ``defaults`` (for example the settings recorded in a persist directory) replace the built-in
        defaults but lose to everything the user said.
        """
        arguments = {k: v for k, v in (arguments or {}).items() if v is not None}
        unknown = set(arguments) - {f.name for f in fields(cls)}
        if unknown:
            raise TypeError(f"unknown FinderLedge setting(s): {sorted(unknown)}")
        environ = os.environ if environ is None else environ
        file_values: Mapping[str, str | None] = {}
        if env_file is not None and Path(env_file).is_file():
            file_values = dotenv_values(env_file)
        warn_unknown_variables(
            {"the environment": environ, str(env_file): file_values},
            (ENV_PREFIX + f.name.upper() for f in fields(cls)),
        )
        values: dict[str, Any] = {}
        sources = {f.name: "default" for f in fields(cls)}  # where each value came from
        for f in fields(cls):
            key = ENV_PREFIX + f.name.upper()
            env_raw, file_raw = environ.get(key), file_values.get(key)
            if f.name in arguments:
                raw, source = arguments[f.name], "argument"
            elif _given(env_raw):
                raw, source = env_raw, f"environment variable {key}"
            elif _given(file_raw):
                raw, source = file_raw, f"{key} in {env_file}"
            elif defaults and defaults.get(f.name) is not None:
                where = values.get("persist_directory")
                raw, source = defaults[f.name], f"the settings recorded in {where}" if where else "defaults"
            else:
                continue
            values[f.name] = _check(f.name, _coerce(f.name, raw, source), source)
            sources[f.name] = source
        if values.get("chroma_url") is not None and "vector_store" not in values:
            # a Chroma server names its store: no vector_store said (or recorded) means chroma, not the default
            values["vector_store"], sources["vector_store"] = "chroma", sources["chroma_url"]
        if values.get("qdrant_url") is not None and "vector_store" not in values:
            values["vector_store"], sources["vector_store"] = "qdrant", sources["qdrant_url"]
        _check_together({**{f.name: f.default for f in fields(cls)}, **values}, sources)
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every setting (JSON-serialisable), URLs without their passwords."""
        data = asdict(self)
        for name in SECRET_SETTINGS:
            if data[name] is not None:
                data[name] = redact_url(data[name])
        return data


# settings fixed when a persist directory is created, reused when it is reopened (the fields flagged ``recorded``)
RECORDED_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(Settings) if f.metadata["recorded"])
# of those, the ones the environment and ``.env`` never change on reopening (the fields flagged ``pinned``)
PINNED_SETTINGS: tuple[str, ...] = tuple(f.name for f in fields(Settings) if f.metadata["pinned"])


def redact_url(url: str) -> str:
    """``url`` without user name and password (``postgresql://***@host:5432/db``): safe for logs and errors."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***"
    netloc, slash, path = rest.partition("/")
    host = netloc.rpartition("@")[2]
    path, _, query = path.partition("?")
    return f"{scheme}://{'***@' if '@' in netloc else ''}{host}{slash}{path}{'?…' if query else ''}"


def _given(raw: Any) -> bool:
    """Whether an environment or ``.env`` value sets its setting (an empty or blank one does not)."""
    return raw is not None and not (isinstance(raw, str) and not raw.strip())


def _rule(name: str) -> Rule:
    """The rule of the setting called ``name``."""
    rule: Rule = Settings.__dataclass_fields__[name].metadata["rule"]  # set by _setting(), read as Any
    return rule


def _refuse(name: str, value: Any, source: str | None, expected: str | None = None) -> ConfigurationError:
    """The error for a bad value: names the setting, where the value came from and what was expected."""
    origin = f" (from {source})" if source else ""
    if name in SECRET_SETTINGS and isinstance(value, str):
        value = redact_url(value)
    return ConfigurationError(
        f"setting {name!r}{origin}: expected {expected or _rule(name).expected}, got {value!r}"
    )


def check_setting(name: str, value: Any) -> Any:
    """``value`` if the rule of setting ``name`` accepts it (ints given for floats become floats), else
    :class:`ConfigurationError`: what a component built without :class:`Settings` (a :class:`Finder` made by
    hand) checks, with the very rule and message ``Settings`` uses."""
    return _check(name, _strict(name, value), None)


def _check(name: str, value: Any, source: str | None) -> Any:
    """Return ``value`` (already of the setting's type) if its rule accepts it, else raise."""
    rule = _rule(name)
    if value is None and rule.optional:
        return None
    if value is None or not rule.test(value):
        raise _refuse(name, value, source)
    return value


def _strict(name: str, value: Any) -> Any:
    """Normalise a value given to ``Settings(...)`` directly: only the setting's own type (ints for floats)."""
    rule = _rule(name)
    if value is None and rule.optional:
        return None
    kind = rule.kind
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if kind is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            pass
    if kind is str and isinstance(value, str):
        return value
    raise _refuse(name, value, None)


def _to_bool(value: Any) -> bool | None:
    """A flag from a bool, 0/1 or a word (true/false, yes/no, on/off; auto/none: None)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    word = value.strip().lower() if isinstance(value, str) else None
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    if word in NONE_WORDS:
        return None
    raise ValueError(value)


def _to_int(value: Any) -> int:
    """An integer from an int (not a bool), a whole float or a decimal string."""
    if isinstance(value, str):
        return int(value.strip())
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise ValueError(value)


def _to_float(value: Any) -> float:
    """A float from a real number (not a bool) or a string."""
    if isinstance(value, str):
        return float(value.strip())
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    raise ValueError(value)


def _to_str(value: Any) -> str:
    """A string, stripped."""
    if isinstance(value, str):
        return value.strip()
    raise ValueError(value)


CONVERTERS: dict[type, Callable[[Any], Any]] = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _coerce(name: str, value: Any, source: str) -> Any:
    """Convert a raw value (a string from the environment, a JSON value, an argument) to the setting's type."""
    if name == "persist_directory" and isinstance(value, (str, os.PathLike)):
        return os.fspath(value)  # a path is kept as given (no stripping)
    try:
        return CONVERTERS[_rule(name).kind](value)
    except (ValueError, OverflowError):
        raise _refuse(name, value, source) from None


def _check_together(values: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    """Checks that involve two settings: chunk_overlap < chunk_size; the two weights not both 0."""

    def said(name: str) -> str:
        return f"{values[name]!r} (from {sources[name]})" if name in sources else repr(values[name])

    if values["chunk_overlap"] >= values["chunk_size"]:
        raise _refuse(
            "chunk_overlap",
            values["chunk_overlap"],
            sources.get("chunk_overlap"),
            f"an integer below chunk_size = {said('chunk_size')}",
        )
    if values.get("keyword_index") == "engine" and values.get("database_url") is None:
        if values.get("vector_store") != "qdrant":
            raise _refuse(
                "keyword_index",
                "engine",
                sources.get("keyword_index"),
                "'local' without database_url or vector_store = 'qdrant' ('engine' scores BM25 inside the "
                f"PostgreSQL ledger or in Qdrant's sparse vectors; vector_store = {said('vector_store')} has no "
                "keyword leg of its own)",
            )
        if values.get("partition_key") is not None:
            raise _refuse(
                "keyword_index",
                "engine",
                sources.get("keyword_index"),
                f"'local' with partition_key = {said('partition_key')} and vector_store = 'qdrant' (Qdrant's IDF "
                "is collection-wide: per-partition statistics need the local leg or PostgreSQL)",
            )
    if values["vector_index"] != "flat" and values["vector_store"] != "faiss":
        raise _refuse(
            "vector_index",
            values["vector_index"],
            sources.get("vector_index"),
            f"'flat' with vector_store = {said('vector_store')} (the other kinds are the FAISS store's)",
        )
    if values["vector_weight"] == 0 and values["keyword_weight"] == 0:
        raise ConfigurationError(
            f"settings 'vector_weight' and 'keyword_weight': expected at least one above 0 (hybrid search would "
            f"score every result 0), got {said('vector_weight')} and {said('keyword_weight')}"
        )
