"""Build, offline and by fixed rules, issue 42's held-out-style sets from the shared SciFact corpus.

The maintainers check "never below the better leg by more than 0.005" on sets we do not have: an entity corpus
(short documents whose queries name an entity the text rarely repeats; the vector leg wins there) and long
documents (BM25 wins there).  These sets imitate those shapes.  Every rule is set a priori: no ranking, no
system's output and no fusion result is read to build or pick them (only the corpus text and its qrels).

* ``entity`` — 2,000 SciFact abstracts (seeded draw by id).  300 of them (seeded) each give one query: the
  document's *title* (it names what the document is about).  The document is stored without its title, and its
  *entity* — the title's :data:`ENTITY_WORDS` rarest content words (document frequency in the 2,000 bodies) — is
  replaced in the body by ``it`` wherever a body word starts with the entity word's first
  :data:`STEM_CHARS` letters: the text rarely repeats the name the query uses.  qrels: query -> its document.
* ``rare-terms`` — the mirror of ``entity-names`` on the same corpus: each query is its document's
  :data:`NAME_WORDS` rarest content words (document frequency in the 2,000 bodies, in body order): codes, gene
  and drug names that BM25 matches exactly and a small embedding model reads poorly (the keyword leg should
  lead; a fusion must be able to lean on it).
* ``entity-strict`` — ``entity`` with *every* content word of the title (by its first :data:`STEM_CHARS`
  letters) made ``it`` in the queried documents: the keyword leg can match the target only through stop-word
  -length fragments, the vector leg through meaning (a set where one leg is close to useless).
* ``entity-names`` — the same corpus and qrels (its index is ``entity``'s), each query only the title's
  :data:`NAME_WORDS` rarest content words in title order (a short name: two of its words are the entity taken
  out of the body, as an entity corpus's query names what its text calls "it").
* ``long`` — SciFact's 300 test queries against long documents: the abstracts relevant to a test query plus a
  seeded fill, :data:`LONG_TOTAL` abstracts in all, shuffled (seeded) and joined :data:`LONG_PER_DOC` to a
  document (``title`` + blank line + abstract, one after another: several thousand words, tens of chunks with
  the default splitter).  qrels at the document level: a query's relevant documents are those holding one of
  its relevant abstracts.
* ``keyword-edge`` — a small set where the keyword leg should win by a small margin, as the business-report
  set: 1,000 SciFact abstracts (seeded) with 150 of their *train* claims (the only ones with a relevant
  abstract in the draw), each claim's words kept but its order shuffled (seeded by query id) and a third of its
  content words replaced by a corpus word of the same length drawn at random (noise a sub-word model reads as
  meaning, and BM25 as rare unmatched terms).

Each set is a BEIR folder under ``--out`` (default ``~/.cache/finderledge-bench/heldout42``, outside the
repository); nothing is copied into the repository.

    python benchmarks/build_heldout42.py            # writes the sets and prints their sizes
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import sys
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from finderledge.evaluation import load_beir

HERE = Path(__file__).resolve().parent
OUT = Path(os.path.expanduser("~/.cache/finderledge-bench/heldout42"))
#: the entity set's corpus and query count (set a priori: embeds in a few minutes on a shared 2-core machine)
ENTITY_DOCS = 2000
ENTITY_QUERIES = 300
#: how many of a title's rarest content words make its "entity", and the prefix length that matches a form of one
ENTITY_WORDS = 2
STEM_CHARS = 6
#: ``entity-names``: the query is the title's this-many rarest content words (in title order), a short name
NAME_WORDS = 4
#: the long-document set: abstracts in all, joined this many to a document
LONG_TOTAL = 2000
LONG_PER_DOC = 20
#: the scifact-sub set's documents
SUB_DOCS = 1000
#: the keyword-edge set
EDGE_DOCS = 1000
EDGE_QUERIES = 150
EDGE_NOISE = 1 / 3
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "their",
        "this",
        "to",
        "was",
        "were",
        "with",
        "without",
        "within",
        "between",
        "than",
        "which",
        "who",
        "whose",
        "not",
        "no",
    ]
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9\-]+")


def dataset_dir(name: str) -> Path:
    """A shared set, beside the repository (``../shared/datasets``)."""
    path = HERE.parents[1] / "shared" / "datasets" / name
    if path.is_dir():
        return path
    raise SystemExit(f"dataset {name} not found under {path.parent}")


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _rng(key: str) -> random.Random:
    return random.Random(_key(key))


def _seeded(ids: list[str], salt: str) -> list[str]:
    """``ids`` in a fixed pseudo-random order (by a hash of salt and id)."""
    return sorted(ids, key=lambda i: _key(f"{salt}:{i}"))


def content_words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text) if len(w) >= 4 and w.lower() not in STOP]


def write_set(
    folder: Path,
    corpus: Mapping[str, tuple[str, str]],
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
) -> None:
    """Write a BEIR folder (corpus, queries, qrels/test.tsv)."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": did, "title": title, "text": text}, ensure_ascii=False) + "\n"
            for did, (title, text) in corpus.items()
        )
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(
            json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n" for qid, text in queries.items()
        )
    with open(folder / "qrels" / "test.tsv", "w", encoding="utf-8") as fh:
        fh.write("query-id\tcorpus-id\tscore\n")
        for qid, docs in qrels.items():
            fh.writelines(f"{qid}\t{did}\t{grade}\n" for did, grade in docs.items())


def strip_entity(text: str, entity: list[str]) -> str:
    """``text`` with every word starting like one of ``entity``'s words (first STEM_CHARS letters) made ``it``."""
    stems = tuple(w[:STEM_CHARS] for w in entity)

    def swap(m: re.Match[str]) -> str:
        return "it" if m.group(0).lower().startswith(stems) else m.group(0)

    return _WORD.sub(swap, text)


def build_entity(out: Path) -> dict[str, int]:
    data = load_beir(dataset_dir("scifact"), "test")
    ids = [d for d in _seeded(list(data.corpus), "entity-docs") if data.corpus[d][0].strip()][:ENTITY_DOCS]
    df: Counter[str] = Counter()
    for d in ids:
        df.update(set(content_words(data.corpus[d][1])))
    corpus: dict[str, tuple[str, str]] = {}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    names: dict[str, str] = {}
    chosen = set(_seeded(ids, "entity-queries")[:ENTITY_QUERIES])
    for d in ids:
        title, body = data.corpus[d]
        if d not in chosen:
            corpus[d] = ("", body)
            continue
        words = list(dict.fromkeys(content_words(title)))
        entity = sorted(words, key=lambda w: (df.get(w, 0), w))[:ENTITY_WORDS]
        corpus[d] = ("", strip_entity(body, entity))
        queries[f"e{d}"] = title
        qrels[f"e{d}"] = {d: 1}
        rarest = set(sorted(words, key=lambda w: (df.get(w, 0), w))[:NAME_WORDS])
        names[f"e{d}"] = " ".join(w for w in words if w in rarest)
    write_set(out / "entity", corpus, queries, qrels)
    write_set(out / "entity-names", corpus, names, qrels)
    rare = {}
    for qid in qrels:
        body = corpus[qid[1:]][1]
        words = list(dict.fromkeys(w for w in content_words(body) if w != "it"))
        rarest = set(sorted(words, key=lambda w: (df.get(w, 0), w))[:NAME_WORDS])
        rare[qid] = " ".join(w for w in words if w in rarest)
    write_set(out / "rare-terms", corpus, rare, qrels)
    strict = {
        d: ("", strip_entity(data.corpus[d][1], content_words(data.corpus[d][0]))) if d in chosen else v
        for d, v in corpus.items()
    }
    write_set(out / "entity-strict", strict, queries, qrels)
    return {"documents": len(corpus), "queries": len(queries)}


def build_long(out: Path) -> dict[str, int]:
    data = load_beir(dataset_dir("scifact"), "test")
    relevant = sorted({d for docs in data.qrels.values() for d in docs if d in data.corpus})
    fill = [d for d in _seeded(list(data.corpus), "long-fill") if d not in set(relevant)]
    pool = _seeded(relevant + fill[: max(0, LONG_TOTAL - len(relevant))], "long-order")
    corpus: dict[str, tuple[str, str]] = {}
    where: dict[str, str] = {}
    for n in range(math.ceil(len(pool) / LONG_PER_DOC)):
        part = pool[n * LONG_PER_DOC : (n + 1) * LONG_PER_DOC]
        did = f"long{n:03d}"
        corpus[did] = ("", "\n\n".join(f"{data.corpus[d][0]}\n\n{data.corpus[d][1]}".strip() for d in part))
        where.update(dict.fromkeys(part, did))
    qrels = {
        q: {where[d]: 1 for d, g in docs.items() if g > 0 and d in where} for q, docs in data.qrels.items()
    }
    qrels = {q: r for q, r in qrels.items() if r}
    write_set(out / "long", corpus, {q: data.queries[q] for q in qrels}, qrels)
    words = [len(text.split()) for _, text in corpus.values()]
    return {"documents": len(corpus), "queries": len(qrels), "mean_words": sum(words) // len(words)}


def build_edge(out: Path) -> dict[str, int]:
    data = load_beir(dataset_dir("scifact"), "train")
    relevant = sorted({d for docs in data.qrels.values() for d in docs if d in data.corpus})
    ids = _seeded(relevant, "edge-docs")[: EDGE_DOCS // 2]
    rest = [d for d in _seeded(list(data.corpus), "edge-fill") if d not in set(ids)]
    ids = ids + rest[: EDGE_DOCS - len(ids)]
    kept = set(ids)
    vocab = sorted({w for d in ids for w in content_words(data.corpus[d][1])})
    by_len: dict[int, list[str]] = {}
    for w in vocab:
        by_len.setdefault(len(w), []).append(w)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for q in _seeded(list(data.qrels), "edge-queries"):
        if len(queries) >= EDGE_QUERIES:
            break
        gold = {d: g for d, g in data.qrels[q].items() if d in kept and g > 0}
        if not gold:
            continue
        rng = _rng(f"edge:{q}")
        words = data.queries[q].rstrip(".").split()
        for i, w in enumerate(words):
            if len(w) >= 4 and w.isalpha() and w.lower() not in STOP and rng.random() < EDGE_NOISE:
                words[i] = rng.choice(by_len.get(len(w), [w]))
        rng.shuffle(words)
        queries[q] = " ".join(words)
        qrels[q] = gold
    write_set(out / "keyword-edge", {d: data.corpus[d] for d in ids}, queries, qrels)
    return {"documents": len(ids), "queries": len(queries)}


def build_scifact_sub(out: Path) -> dict[str, int]:
    """SciFact's 300 test queries on a subset: their relevant abstracts plus a seeded fill to SUB_DOCS (a
    check that a fusion change does not cost SciFact, for a machine that cannot embed all 5,183 in time)."""
    data = load_beir(dataset_dir("scifact"), "test")
    relevant = sorted({d for docs in data.qrels.values() for d in docs if d in data.corpus})
    fill = [d for d in _seeded(list(data.corpus), "sub-fill") if d not in set(relevant)]
    ids = relevant + fill[: max(0, SUB_DOCS - len(relevant))]
    write_set(out / "scifact-sub", {d: data.corpus[d] for d in ids}, data.queries, data.qrels)
    return {"documents": len(ids), "queries": len(data.queries)}


BUILDERS = {
    "entity": build_entity,
    "long": build_long,
    "keyword-edge": build_edge,
    "scifact-sub": build_scifact_sub,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("sets", nargs="*", default=list(BUILDERS), help=f"of {list(BUILDERS)}")
    args = parser.parse_args(argv)
    for name in args.sets:
        sizes = BUILDERS[name](args.out)
        print(name, args.out / name, sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
