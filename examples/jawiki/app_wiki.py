"""The design's UI command: ``python examples/jawiki/app_wiki.py --host 0.0.0.0 --port 7860``.

Runs ``jawiki.py serve`` (a server-rendered page and a JSON endpoint, FastAPI: the design's Gradio is replaced,
see README.md) over the index in ``--out_dir`` (default ``$JAWIKI_WORKDIR``, else ``examples/jawiki/work``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import jawiki


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--out_dir", default=str(jawiki.DEFAULT_WORKDIR))
    a, rest = p.parse_known_args(argv)
    return jawiki.main(["serve", "--host", a.host, "--port", str(a.port), "--workdir", a.out_dir, *rest])


if __name__ == "__main__":
    sys.exit(main())
