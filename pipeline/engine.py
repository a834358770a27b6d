"""Locating the Stockfish binary."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

DEBIAN_PATH = "/usr/games/stockfish"


class EngineNotFound(RuntimeError):
    pass


def find_stockfish(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """STOCKFISH_PATH (or an explicit path), then PATH, then Debian's /usr/games/stockfish."""
    env = os.environ if environ is None else environ
    candidates = [explicit, env.get("STOCKFISH_PATH"), shutil.which("stockfish", path=env.get("PATH")), DEBIAN_PATH]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    raise EngineNotFound(
        "Stockfish not found: set STOCKFISH_PATH, put `stockfish` on PATH, or install it "
        "(Debian/Ubuntu: `apt-get install -y stockfish`, which puts it at /usr/games/stockfish; "
        "`make install` does this when run as root)"
    )
