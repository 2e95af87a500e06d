"""The names a registry holds in a fresh interpreter: what FinderLedge itself registers, whatever tests of the
session registered since (each contract test checks that it covers every built-in name)."""

from __future__ import annotations

import json
import subprocess
import sys


def built_in_names(module: str, registry: str) -> set[str]:
    """``module.registry.names()`` in a new Python process."""
    code = f"import json, {module} as m; print(json.dumps(m.{registry}.names()))"
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))
