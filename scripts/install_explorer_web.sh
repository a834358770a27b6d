#!/usr/bin/env bash
# The explorer page's board library (cm-chessboard, MIT) from npm into explorer/static/vendor/,
# where `chess-pipeline explore` serves it (nothing is fetched from a CDN at run time).
# Installs Debian's nodejs and npm when missing and we can (root or sudo with apt-get); where
# that or npm fails it warns and leaves the page without its board.
# The version is pinned in explorer/web/package.json and package-lock.json (npm ci).
set -euo pipefail
cd "$(dirname "$0")/.."
WEB=explorer/web
DEST=explorer/static/vendor/cm-chessboard
VERSION=$(sed -n 's/.*"cm-chessboard": *"\([^"]*\)".*/\1/p' "$WEB/package.json")
if [ -f "$DEST/VERSION" ] && [ "$(cat "$DEST/VERSION")" = "$VERSION" ] && [ -f "$DEST/Chessboard.js" ]; then exit 0; fi
found() { command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; }
if ! found && command -v apt-get >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
  if [ "$(id -u)" = 0 ] || [ -n "$SUDO" ]; then
    echo "installing Node.js and npm (Debian packages nodejs, npm) for the explorer page's board..." >&2
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
  fi
fi
# Without the board only the explorer page is missing (its JSON API works; the page says what
# to do), so this warns instead of failing the install; CI's browser tests fail on it.
if ! found; then
  cat >&2 <<'MSG'
warning: Node.js/npm are not installed and could not be installed automatically, so the explorer
page's board (cm-chessboard) is missing; everything else works. Install them, then run make install:
  Debian/Ubuntu:  sudo apt-get install -y nodejs npm
MSG
  exit 0
fi
if ! npm ci --prefix "$WEB" --no-audit --no-fund --loglevel=error >/dev/null; then
  echo "warning: npm ci in $WEB failed (is the npm registry reachable?), so the explorer page's board is missing; run make install again" >&2
  exit 0
fi
SRC="$WEB/node_modules/cm-chessboard"
TMP=$(mktemp -d "explorer/static/vendor/.cm-chessboard.XXXXXX" 2>/dev/null || { mkdir -p explorer/static/vendor && mktemp -d "explorer/static/vendor/.cm-chessboard.XXXXXX"; })
cp -R "$SRC/src/." "$TMP/"
cp -R "$SRC/assets" "$TMP/assets"
cp "$SRC/LICENSE" "$TMP/LICENSE"
echo "$VERSION" > "$TMP/VERSION"
chmod -R a+rX "$TMP"
rm -rf "$DEST"
mv "$TMP" "$DEST"
echo "explorer: cm-chessboard $VERSION copied to $DEST" >&2
