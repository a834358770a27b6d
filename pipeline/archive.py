"""Reading PGN archives as a stream of raw game texts.

An archive is one file: plain PGN, or PGN compressed with zstd, bzip2 or gzip. The
compression is detected from the file's first bytes (its name is only a fallback for
an empty file), and the file is read as a stream, so memory stays constant whatever
its size. Game boundaries follow the PGN standard as python-chess reads it: a game is
its tag pairs followed by movetext, and movetext ends at a blank line outside a
comment (or where the next game's tag section starts).

Hostile input: NUL bytes (or more than 1% control characters) in the first 4,096 decompressed
bytes make the archive an ArchiveError (not PGN text); a NUL further on is left in its game's
text, which pipeline.games rejects as binary_data. A UTF-8 byte-order mark at the start of a
game (the file's first included) is dropped, as python-chess drops it. A brace comment left
open runs to the next '}', games later if need be (the standard, and python-chess, read it
so); the games whose tag sections stand inside it are counted and reported in ArchiveNotes.
"""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import BinaryIO

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
GZIP_MAGIC = b"\x1f\x8b"
BZIP2_MAGIC = b"BZh"

CHUNK = 1 << 20
HEAD_BYTES = 4096
"""The archive's first bytes (after decompression) that must look like text."""
BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark some editors write at the start of a file."""


class ArchiveError(Exception):
    """The archive as a whole cannot be read (bad compression, truncation, not PGN)."""


@dataclass(frozen=True)
class ArchiveWarning:
    """Something wrong in an archive that loses data without making a game unreadable."""

    line: int
    """1-based line of the (decompressed) archive where the problem starts."""
    message: str
    """One line for the user: what is wrong, where, and what to do."""


@dataclass
class ArchiveNotes:
    """What the reader noticed about an archive besides its games (filled as it reads)."""

    warnings: list[ArchiveWarning] = field(default_factory=list)
    games_in_unclosed_comments: int = 0
    """Tag sections (games) that stand inside a brace comment opened in an earlier game and
    not closed before them: per the PGN standard (and python-chess) the comment runs to the
    next '}', so these games are part of that comment and are neither games nor rejected."""

    def swallowed(self, name: str, index: int, opened: int, tag_lines: list[int], closed: int | None) -> None:
        self.games_in_unclosed_comments += len(tag_lines)
        where = f"the '}}' at line {closed:,}" if closed is not None else "the end of the archive"
        shown = ", ".join(f"{n:,}" for n in tag_lines[:5]) + (", ..." if len(tag_lines) > 5 else "")
        many = len(tag_lines) > 1
        self.warnings.append(
            ArchiveWarning(
                opened,
                (
                    f"{name}: line {opened:,}: a '{{' comment in the game with game_index {index} is not closed before "
                    f"the tag pairs of the next game (line {tag_lines[0]:,}); it runs to {where}, so {len(tag_lines)} "
                    f"game{'s' if many else ''} (tags at line{'s' if many else ''} {shown}) {'are' if many else 'is'} "
                    "read as comment text and lost: close the comment in the archive and ingest it again"
                ),
            )
        )


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

    def close(self) -> None:
        # BufferedReader.close() closes this reader; the compressed file under it goes too.
        try:
            self._raw.close()
        finally:
            super().close()

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
            f"{name}: not a PGN text file (NUL bytes in the first {HEAD_BYTES:,} bytes); "
            "is it an unsupported compression format or a binary file?"
        )
    text = head.decode("latin-1")
    control = sum(1 for c in text if ord(c) < 32 and c not in "\r\n\t\x0c")
    if text and control > 0.01 * len(text):
        raise ArchiveError(
            f"{name}: not a PGN text file ({control} control characters in the first {HEAD_BYTES:,} bytes); "
            "is it an unsupported compression format or a binary file?"
        )


def iter_raw_games(path: Path, notes: ArchiveNotes | None = None) -> Iterator[RawGame]:
    """Yield every game of the archive, in order, as raw text.

    Raises ArchiveError for unreadable archives: truncated or corrupt compression,
    binary content (NUL bytes or many control characters in the first 4,096 bytes). A
    truncated *last game* of an otherwise sound file is not an archive error: it is yielded
    with terminated=False and rejected downstream; so is a game with NUL bytes further on
    (rejected as binary_data). `notes`, when given, collects what else the reader noticed
    (games lost inside unclosed comments).
    """
    path = Path(path)
    name = path.name
    try:
        stream = open_archive(path)
    except OSError as e:
        raise ArchiveError(f"{name}: cannot open: {e}") from e
    with stream:
        yield from _split_games(stream, name, ArchiveNotes() if notes is None else notes, detect_compression(path))


def _split_games(stream: BinaryIO, name: str, notes: ArchiveNotes, compression: str = "none") -> Iterator[RawGame]:
    index = 0
    lines: list[bytes] = []
    in_movetext = False
    in_comment = False
    # Whether the game has a line other than tag pairs: only then does a blank line after
    # its tag section end it (tag-only games end at the next tag line or at EOF).
    has_moves = False
    # Unclosed comments: where the open comment started, whether its last line was blank,
    # and the tag lines that followed a blank line inside it (the tag sections it swallows).
    comment_line = 0
    blank_in_comment = False
    lost: list[int] = []
    lineno = 0
    try:
        # The first 4,096 bytes decide whether this is text at all; the head is then read
        # on to the end of its line and split like the rest.
        head = stream.read(HEAD_BYTES)
        _check_text(head[len(BOM) :] if head.startswith(BOM) else head, name)
        if len(head) == HEAD_BYTES and not head.endswith(b"\n"):
            head += stream.readline()
        for lineno, line in enumerate(chain(io.BytesIO(head), stream), 1):
            stripped = line.strip()
            if not lines:
                # Between games: blank lines and escape lines are skipped; a byte-order mark
                # at the start of a game is dropped (as python-chess does).
                if line.startswith(BOM):
                    while line.startswith(BOM):
                        line = line[len(BOM) :]
                    stripped = line.strip()
                if not stripped or line.startswith(b"%"):
                    continue
                lines.append(line)
                in_movetext = has_moves = not stripped.startswith(b"[")
                in_comment = in_movetext and b"{" in line and _comment_state(line, False)
                if in_comment:
                    comment_line = lineno
                continue
            if not in_movetext:
                lines.append(line)
                if not stripped.startswith(b"["):
                    # The blank line between tags and movetext, or movetext right after the tags.
                    in_movetext = True
                    if stripped:
                        has_moves = True
                        in_comment = b"{" in line and _comment_state(line, False)
                        if in_comment:
                            comment_line = lineno
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
                if stripped.startswith(b"["):
                    if _looks_like_tag(stripped):
                        # Next game's tags without a separating blank line.
                        yield RawGame(index, _decode(b"".join(lines)).replace("\r\n", "\n"), True)
                        index += 1
                        lines = [line]
                        in_movetext = has_moves = False
                        continue
                else:
                    has_moves = True
                lines.append(line)
                if b"{" in line:
                    in_comment = _comment_state(line, False)
                    if in_comment:
                        comment_line = lineno
                continue
            # In a brace comment: it runs to the next '}', blank lines and tags included.
            lines.append(line)
            if not stripped:
                blank_in_comment = True
                continue
            if stripped.startswith(b"["):
                if blank_in_comment and _looks_like_tag(stripped):
                    lost.append(lineno)  # the tag section of a game the comment swallows
            else:
                has_moves = True
            blank_in_comment = False
            if b"}" in line:
                if lost:
                    notes.swallowed(name, index, comment_line, lost, lineno)
                    lost = []
                in_comment = _comment_state(line, True)
                if in_comment:
                    comment_line = lineno
    except EOFError:
        # gzip and bz2 raise a bare EOFError; the message below ends the error chain (from
        # None), so it is what the CLI prints, as for a truncated zstd stream.
        kind = compression if compression != "none" else "compressed"
        raise ArchiveError(
            f"{name}: {kind} stream is truncated (input ended inside compressed data, after {index} games); "
            "the file is incomplete, download or copy it again"
        ) from None
    except (OSError, zstandard.ZstdError) as e:
        raise ArchiveError(
            f"{name}: cannot read the archive after {index} games, it is corrupt or unreadable "
            f"({e}); download or copy it again"
        ) from None
    if lost:
        notes.swallowed(name, index, comment_line, lost, None)
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
