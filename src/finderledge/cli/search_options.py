"""The ``finderledge`` options that reach the search API beyond a plain query (``--score-threshold``, ``--mmr``,
``--fetch-k``, ``--lambda-mult``), ``add --metadata``, and the ``answer`` command's own options (``--llm``,
``--llm-base-url``): declared and checked here so that :mod:`finderledge.cli.commands` only wires them in."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ..errors import ConfigurationError
from ..metadata import normalize_metadata

__all__ = [
    "ANSWER_SUMMARY",
    "answer_options",
    "llm_options",
    "metadata_option",
    "parse_metadata",
    "search_kwargs",
    "search_options",
]

ANSWER_SUMMARY = "answer a question from the documents, citing its sources"


def _unit_interval(text: str) -> float:
    """An argparse type: a number in [0, 1] (the scale of every score and of MMR's lambda)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1], got {text!r}")
    return value


def _positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def search_options(parser: argparse.ArgumentParser) -> None:
    """``--score-threshold``, ``--mmr``, ``--fetch-k`` and ``--lambda-mult`` of search, context and answer
    (``FinderLedge.search(q, score_threshold=, mmr=True, fetch_k=, lambda_mult=)``)."""
    parser.add_argument(
        "--score-threshold",
        type=_unit_interval,
        default=None,
        metavar="S",
        help="leave out results whose relevance score (0 to 1, comparable between queries) is below S; "
        "when none is left: no results, exit 1",
    )
    parser.add_argument(
        "--mmr",
        action="store_true",
        help="diversify: maximal marginal relevance among the best --fetch-k candidates (no near-duplicates)",
    )
    parser.add_argument(
        "--fetch-k",
        type=_positive_int,
        default=None,
        metavar="N",
        help="with --mmr: candidates to choose from (default 20)",
    )
    parser.add_argument(
        "--lambda-mult",
        type=_unit_interval,
        default=None,
        metavar="L",
        help="with --mmr: 1 ranks by relevance only, 0 by diversity only (default 0.5)",
    )


def search_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The search options given on the command line, as ``FinderLedge.search`` keywords (MMR's two
    numbers refused without ``--mmr``, naming the options)."""
    if not args.mmr and (args.fetch_k is not None or args.lambda_mult is not None):
        given = [
            n for n, v in (("--fetch-k", args.fetch_k), ("--lambda-mult", args.lambda_mult)) if v is not None
        ]
        raise ConfigurationError(f"{'/'.join(given)}: applies with --mmr only (add --mmr)")
    options: dict[str, Any] = {"score_threshold": args.score_threshold}
    if args.mmr:
        options.update(mmr=True, fetch_k=args.fetch_k, lambda_mult=args.lambda_mult)
    return options


def llm_options(parser: argparse.ArgumentParser, writes: str = "the answer") -> None:
    """``--llm`` and ``--llm-base-url``, read from ``$FINDERLEDGE_LLM``/``$FINDERLEDGE_LLM_BASE_URL`` by default:
    one declaration for ``answer``, ``serve`` and ``mcp``."""
    parser.add_argument(
        "--llm",
        default=os.environ.get("FINDERLEDGE_LLM"),
        metavar="SPEC",
        help=f"the model that writes {writes}: openai:<model>, ollama:<model> or llamacpp:<path.gguf> "
        "(default $FINDERLEDGE_LLM; none: an extractive answer quoting the best passages)",
    )
    parser.add_argument(
        "--llm-base-url",
        default=os.environ.get("FINDERLEDGE_LLM_BASE_URL"),
        metavar="URL",
        help="an OpenAI-compatible or Ollama server's URL (default $FINDERLEDGE_LLM_BASE_URL)",
    )


def answer_options(parser: argparse.ArgumentParser) -> None:
    """``--llm`` and ``--llm-base-url``: the same settings and variables as ``serve`` and ``mcp``."""
    llm_options(parser)
    parser.add_argument(
        "--max-chars",
        type=_positive_int,
        default=None,
        metavar="N",
        help="cap the passages given to the model (or quoted) at this many characters",
    )


def metadata_option(parser: argparse.ArgumentParser) -> None:
    """``add --metadata``: one JSON object stored with every document of the call."""
    parser.add_argument(
        "--metadata",
        default=None,
        metavar="JSON",
        help='a JSON object stored with every document added, e.g. \'{"lang": "ja"}\'; a key it shares '
        "with a Markdown file's front matter takes this value (as add_document(path, metadata) does)",
    )


def parse_metadata(text: str | None) -> dict[str, Any] | None:
    """``--metadata``'s JSON object (None when not given); anything else is refused naming the option."""
    if text is None:
        return None
    example = '\'{"lang": "ja"}\''
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"--metadata: expected a JSON object such as {example} ({exc})") from None
    if not isinstance(value, dict):
        raise ConfigurationError(
            f"--metadata: expected a JSON object such as {example}, got {type(value).__name__} {text!r}"
        )
    return normalize_metadata(value, "--metadata")  # a key or value the index cannot store, named now
