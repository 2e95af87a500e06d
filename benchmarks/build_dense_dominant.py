"""Build, offline and by fixed rules, evaluation sets where the vector leg should beat the keyword leg (issue 32).

Two constructions, both set a priori (no system's output and no fusion result is used to build or pick them):

* ``typo`` — every query is rewritten by rule: each content word (4+ letters, not a stop word) of the query,
  chosen by a coin seeded with the query id (probability :data:`TYPO_SHARE`), gets one misspelling (two inner
  letters swapped, an inner letter dropped, or one doubled).  BM25 matches exact stems, so a misspelt word
  no longer matches; a sub-word embedding model still reads most of it.  The gold passages are not read.
* ``typo-all`` — the same with every content word misspelt (added after ``typo`` left the keyword leg ahead
  on the dev split: scifact train, keyword 0.578 vs vector 0.486; a set the vector leg leads was wanted).
* ``keyword-poor`` — the queries whose relevant passages share at most :data:`MAX_OVERLAP` of the query's
  BM25 terms (the library's default tokenizer: stemmed, stop words removed), i.e. queries that paraphrase.
  This reads the gold passages' text (the data), never a ranking.

Splits: ``dev`` = scifact *train* queries (the only split looked at while choosing the fusion), ``heldout`` =
scifact test and msmarco-5k test (not looked at while choosing).  Each set is a BEIR folder under
``--out`` (default ``~/.cache/finderledge-bench/dense-dominant``, outside the repository) whose
``corpus.jsonl`` is a symbolic link to the shared dataset's (never copied).

    python benchmarks/build_dense_dominant.py            # writes the sets and prints their sizes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from collections.abc import Mapping
from pathlib import Path

from finderledge.evaluation import load_beir
from finderledge.tokenizer import AutoTokenizer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1] / "shared" / "datasets"
OUT = Path(os.path.expanduser("~/.cache/finderledge-bench/dense-dominant"))
#: share of a query's content words that get a misspelling (set a priori: half)
TYPO_SHARE = 0.5
#: a keyword-poor query's relevant passages hold at most this share of its BM25 terms (set a priori: half)
MAX_OVERLAP = 0.5
SOURCES = (("scifact", "train", "dev"), ("scifact", "test", "heldout"), ("msmarco-5k", "test", "heldout"))


def _rng(key: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big"))


def misspell(word: str, rng: random.Random) -> str:
    """One misspelling of ``word`` (4+ letters): swap two inner letters, drop one, or double one."""
    i = rng.randrange(1, len(word) - 2)
    how = rng.randrange(3)
    if how == 0 and word[i] != word[i + 1]:
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if how == 1:
        return word[:i] + word[i + 1 :]
    return word[: i + 1] + word[i] + word[i + 1 :]


def typo_query(qid: str, text: str, tokenizer: AutoTokenizer, share: float = TYPO_SHARE) -> str:
    """``text`` with about ``share`` of its content words misspelt (seeded by ``qid``)."""
    rng = _rng(f"typo:{qid}")
    out = []
    for word in text.split(" "):
        core = word.strip(".,;:!?()[]\"'")
        content = len(core) >= 4 and core.isalpha() and tokenizer(core)
        if content and rng.random() < share:
            word = word.replace(core, misspell(core, rng), 1)
        out.append(word)
    return " ".join(out)


def overlap(query: str, passages: list[str], tokenizer: AutoTokenizer) -> float:
    """Share of the query's distinct BM25 terms found in any of ``passages`` (1.0 for a query without terms)."""
    terms = set(tokenizer(query))
    if not terms:
        return 1.0
    found: set[str] = set()
    for p in passages:
        found |= terms & set(tokenizer(p))
    return len(found) / len(terms)


def write_set(
    folder: Path, source: Path, queries: Mapping[str, str], qrels: Mapping[str, Mapping[str, int]]
) -> None:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    link = folder / "corpus.jsonl"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(source / "corpus.jsonl")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n" for qid, text in queries.items()
        )
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid in queries:
            fh.writelines(f"{qid}\t{doc}\t{grade}\n" for doc, grade in qrels[qid].items())


def build(out: Path) -> dict[str, int]:
    tokenizer = AutoTokenizer()
    sizes: dict[str, int] = {}
    for name, split, role in SOURCES:
        data = load_beir(ROOT / name, split)
        queries = {q: t for q, t in data.queries.items() if q in data.qrels}
        typo = {q: typo_query(q, t, tokenizer) for q, t in queries.items()}
        typo_all = {q: typo_query(q, t, tokenizer, 1.0) for q, t in queries.items()}
        poor = {
            q: t
            for q, t in queries.items()
            if overlap(
                t,
                [" ".join(data.corpus[d]) for d, g in data.qrels[q].items() if g > 0 and d in data.corpus],
                tokenizer,
            )
            <= MAX_OVERLAP
        }
        for kind, chosen in (("typo", typo), ("typo-all", typo_all), ("keyword-poor", poor)):
            if len(chosen) < 20:  # msmarco-5k's 43 queries leave 1 keyword-poor one: no set
                continue
            folder = out / f"{role}-{kind}-{name}"
            write_set(folder, ROOT / name, chosen, data.qrels)
            sizes[folder.name] = len(chosen)
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for folder, n in build(args.out).items():
        sys.stdout.write(f"{args.out / folder}: {n} queries\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
