"""Misspelled ``FINDERLEDGE_*`` variables: one warning naming the nearest valid variable, instead of being
ignored silently (a ``FINDERLEDGE_CHUNKSIZE=500`` that changes nothing is hard to notice)."""

from __future__ import annotations

import difflib
import logging
import threading
from collections.abc import Iterable, Mapping

__all__ = ["OTHER_VARIABLES", "warn_unknown_variables"]

logger = logging.getLogger("finderledge.config")

PREFIX = "FINDERLEDGE_"
#: the variables read outside the settings table: the model cache, the service's language model and tokens,
#: and the test suite's and benchmarks' own switches (never warned about)
OTHER_VARIABLES = frozenset(
    PREFIX + name
    for name in (
        "CACHE_DIR",
        "LLM",
        "LLM_BASE_URL",
        "JWT_SECRET",
        "JWT_PUBLIC_KEY",
        "JWT_CLAIM",
        "JWT_AUDIENCE",
        "JWT_ISSUER",
        "REQUIRE_DATASETS",
        "EXIT_RUNS",
        "FUZZ_EXAMPLES",
        "FILTER_EXAMPLES",
        "TENANT_EXAMPLES",
        "SQLITE_MMAP_BYTES",  # ledgers.sqlite: bytes of the ledger a reading connection maps (0: none)
    )
)
#: prefixes of variable families read elsewhere: the service's own settings (set by ``finderledge serve`` for
#: its workers) and the load tests'
OTHER_PREFIXES = (PREFIX + "SERVER_", PREFIX + "LOAD_")

_warned: set[str] = set()
_lock = threading.Lock()


def unknown_variable_advice(name: str, known: Iterable[str]) -> str | None:
    """The warning for ``name`` (a ``FINDERLEDGE_*`` variable), or None when FinderLedge reads it."""
    valid = set(known) | OTHER_VARIABLES
    if not name.startswith(PREFIX) or name in valid or name.startswith(OTHER_PREFIXES):
        return None
    # compared without the common prefix, which would make every name look alike
    nearest = difflib.get_close_matches(name[len(PREFIX) :], sorted(v[len(PREFIX) :] for v in valid), 1, 0.6)
    hint = f"did you mean {PREFIX}{nearest[0]}?" if nearest else "the settings table in README.md lists them"
    return f"{name} is not a FinderLedge variable and is ignored; {hint}"


def warn_unknown_variables(sources: Mapping[str, Mapping[str, object]], known: Iterable[str]) -> None:
    """Log one warning per unknown ``FINDERLEDGE_*`` name (once a process) found in ``sources`` (where each is
    read from, e.g. ``{"the environment": os.environ, ".env": values}``)."""
    known = set(known)
    for where, values in sources.items():
        for name in values:
            advice = unknown_variable_advice(name, known)
            if advice is None:
                continue
            with _lock:
                if name in _warned:
                    continue
                _warned.add(name)
            logger.warning("%s (in %s)", advice, where)
