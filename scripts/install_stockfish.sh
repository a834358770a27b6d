#!/usr/bin/env bash
# Make sure a Stockfish binary is available: STOCKFISH_PATH, PATH, /usr/games/stockfish.
# Installs Debian's `stockfish` package when missing and we can (root or sudo with apt-get).
set -euo pipefail
found() { [ -n "${STOCKFISH_PATH:-}" ] && [ -x "$STOCKFISH_PATH" ] || command -v stockfish >/dev/null 2>&1 || [ -x /usr/games/stockfish ]; }
if found; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else SUDO=""; fi
  fi
  if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
    echo "installing Stockfish (Debian package stockfish)..." >&2
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq stockfish >/dev/null
    found && exit 0
  fi
fi
cat >&2 <<'MSG'
Stockfish is not installed and could not be installed automatically.
Install it yourself, then run the command again:
  Debian/Ubuntu:  sudo apt-get install -y stockfish      (binary at /usr/games/stockfish)
  macOS:          brew install stockfish
  elsewhere:      download Stockfish and set STOCKFISH_PATH=/path/to/stockfish
MSG
exit 1
