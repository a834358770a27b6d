"""Reading PGN archives as a stream of raw game texts.

An archive is one file: plain PGN, or PGN compressed with zstd, bzip2 or gzip. The
compression is detected from the file's first bytes (its name is only a fallback for
an empty file), and the file is read as a stream, so memory stays constant whatever
its size. Game boundaries follow the PGN standard as python-chess reads it: a game is
its tag pairs followed by movetext, and movetext ends at a blank line outside a
comment (or where the next game's tag section starts).
"""

from __future__ import annotations

import bz2
import gzip
import io
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
BZIP2_MAGIC = b"BZh"

CHUNK = 1 << 20


class ArchiveError(Exception):
    """The archive as a whole cannot be read (bad compression, truncation, not PGN)."""


@dataclass(frozen=True)
class RawGame:
    """One game's text as it stands in the archive."""

    index: int
    """0-based position of the game in the archive."""
    text: str
    """The game's text: tag pairs and movetext, line endings normalised to \\n."""
    terminated: bool
    """False when the archive ended inside this game's movetext (no closing blank line
    and no result marker), which is how a truncated last game looks."""


def detect_compression(path: Path) -> str:
    """'zstd', 'gzip', 'bzip2' or 'none', from the file's magic bytes."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(BZIP2_MAGIC) and len(head) == 4 and head[3:4] in b"123456789":
        return "bzip2"
    return "none"


class _ZstdFramesReader(io.RawIOBase):
    """zstd decompression that reports truncation.

    zstandard's stream_reader returns a silent EOF when the input stops mid-frame; a
    truncated download would then look like a shorter archive. This reader decodes
    frame by frame and raises ArchiveError when the input ends inside a frame.
    """

    def __init__(self, raw: BinaryIO, name: str):
        self._raw = raw
        self._name = name
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False
        self._pending = b""
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        while not self._pending and not self._eof:
            data = self._raw.read(CHUNK)
            if not data:
                if self._in_frame:
                    raise ArchiveError(
                        f"{self._name}: zstd stream is truncated (input ended inside a frame); "
                        "the file is incomplete, download or copy it again"
                    )
                self._eof = True
                break
            self._feed(data)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _feed(self, data: bytes) -> None:
        out = []
        while data:
            try:
                out.append(self._obj.decompress(data))
            except zstandard.ZstdError as e:
                raise ArchiveError(f"{self._name}: corrupt zstd data: {e}") from e
            self._in_frame = True
            if self._obj.eof:
                data = self._obj.unused_data
                self._obj = self._dctx.decompressobj()
                self._in_frame = False
            else:
                data = b""
        self._pending += b"".join(out)


def open_archive(path: Path) -> BinaryIO:
    """Open an archive for streaming reads of its decompressed bytes."""
    path = Path(path)
    kind = detect_compression(path)
    if kind == "zstd":
        return io.BufferedReader(_ZstdFramesReader(open(path, "rb"), path.name), CHUNK)
    if kind == "gzip":
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if kind == "bzip2":
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb", buffering=CHUNK)


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Older PGN files are often latin-1 (player names with accents).
        return data.decode("latin-1")


def _check_text(head: bytes, name: str) -> None:
    if b"\x00" in head:
        raise ArchiveError(
            f"{name}: not a PGN text file (NUL bytes in the first {len(head)} bytes); "
            "is it an unsupported compression format or a binary file?"
        )
    text = head.decode("latin-1")
    control = sum(1 for c in text if ord(c) < 32 and c not in "\r\n\t\x0c")
    if text and control > 0.01 * len(text):
        raise ArchiveError(f"{name}: not a PGN text file ({control} control characters in the first {len(head)} bytes)")


def iter_raw_games(path: Path) -> Iterator[RawGame]:
    """Yield every game of the archive, in order, as raw text.

    Raises ArchiveError for unreadable archives: truncated or corrupt compression,
    binary content. A truncated *last game* of an otherwise sound file is not an
    archive error: it is yielded with terminated=False and rejected downstream.
    """
    path = Path(path)
    name = path.name
    try:
        stream = open_archive(path)
    except OSError as e:
        raise ArchiveError(f"{name}: cannot open: {e}") from e
    with stream:
        yield from _split_games(stream, name)


def _split_games(stream: BinaryIO, name: str) -> Iterator[RawGame]:
    index = 0
    lines: list[bytes] = []
    in_movetext = False
    in_comment = False
    # Whether the game has a line other than tag pairs: only then does a blank line after
    # its tag section end it (tag-only games end at the next tag line or at EOF).
    has_moves = False
    checked = False
    try:
        for line in stream:
            if not checked:
                _check_text(line[:4096], name)
                checked = True
            stripped = line.strip()
            if not lines:
                # Between games: blank lines and escape lines are skipped.
                if not stripped or line.startswith(b"%"):
                    continue
                if b"\x00" in line:
                    raise ArchiveError(f"{name}: binary data (NUL bytes) after game {index}")
                lines.append(line)
                in_movetext = has_moves = not stripped.startswith(b"[")
                in_comment = _comment_state(line, False) if in_movetext else False
                continue
            if not in_movetext:
                lines.append(line)
                if not stripped.startswith(b"["):
                    # The blank line between tags and movetext, or movetext right after the tags.
                    in_movetext = True
                    if stripped:
                        has_moves = True
                        in_comment = _comment_state(line, False)
                continue
            # In movetext.
            if not in_comment:
                if not stripped:
                    if has_moves:
                        yield RawGame(index, _decode(b"".join(lines)).replace("\r\n", "\n"), True)
                        index += 1
                        lines = []
                        in_movetext = False
                    continue
                if stripped.startswith(b"[") and _looks_like_tag(stripped):
                    # Next game's tags without a separating blank line.
                    yield RawGame(index, _decode(b"".join(lines)).replace("\r\n", "\n"), True)
                    index += 1
                    lines = [line]
                    in_movetext = has_moves = False
                    continue
            if b"\x00" in line:
                raise ArchiveError(f"{name}: binary data (NUL bytes) in game {index}")
            lines.append(line)
            if stripped and not stripped.startswith(b"["):
                has_moves = True
            in_comment = _comment_state(line, in_comment)
    except (EOFError, OSError, zstandard.ZstdError) as e:
        raise ArchiveError(f"{name}: archive is truncated or corrupt after {index} games: {e}") from e
    if lines:
        text = _decode(b"".join(lines)).replace("\r\n", "\n")
        yield RawGame(index, text, _ends_with_result(text) and not in_comment)


def _looks_like_tag(stripped: bytes) -> bool:
    return stripped.endswith(b"]") and b'"' in stripped


def _comment_state(line: bytes, in_comment: bool) -> bool:
    """Whether a brace comment is still open after this movetext line."""
    if b";" not in line:
        # Braces do not nest: the line's last brace decides ('{' opens or is inside a comment,
        # '}' closes one or is stray outside any).
        opening, closing = line.rfind(b"{"), line.rfind(b"}")
        return in_comment if opening == closing else opening > closing
    i = 0
    while True:
        if in_comment:
            i = line.find(b"}", i)
            if i < 0:
                return True
            in_comment = False
            i += 1
            continue
        brace = line.find(b"{", i)
        semicolon = line.find(b";", i)
        if semicolon >= 0 and (brace < 0 or semicolon < brace):
            return False  # a rest-of-line comment hides everything after it
        if brace < 0:
            return False
        in_comment = True
        i = brace + 1


_RESULTS = ("1-0", "0-1", "1/2-1/2", "*")


def _ends_with_result(text: str) -> bool:
    body = text.rstrip()
    return body.endswith(_RESULTS)
