"""Reading PGN archives as a stream of raw game texts.

An archive is one file: plain PGN, or PGN compressed with zstd, bzip2 or gzip. The
compression is detected from the file's first bytes (its name is only a fallback for
an empty file), and the file is read as a stream, so memory stays constant whatever
its size. Game boundaries follow the PGN standard as python-chess reads it: a game is
its tag pairs followed by movetext, and movetext ends at a blank line outside a
comment (or where the next game's tag section starts).

Hostile input: NUL bytes (or more than 1% control characters) in the first 4,096 decompressed
bytes make the archive an ArchiveError (not PGN text); a NUL further on is left in its game's
text, which pipeline.ingest.games rejects as binary_data. A UTF-8 byte-order mark at the start of a
game (the file's first included) is dropped, as python-chess drops it. A brace comment left
open runs to the next '}', games later if need be (the standard, and python-chess, read it
so); the games whose tag sections stand inside it are counted and reported in ArchiveNotes.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
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
UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
"""A file starting with one of these is UTF-16 (Windows editors' "Unicode"): transcoded as read."""
MAX_GAME_BYTES = 4 << 20
"""The most bytes one game (tags, movetext and comments) may take: 4 MiB. Real games are far
smaller (a lichess game with a clock comment on every move is a few tens of KB, a heavily
annotated one a few hundred), so a longer one is a runaway comment or a damaged archive. Its
text is not kept: it is scanned to its end in bounded memory and rejected as too_long, so the
reader's memory never grows with a line's or a game's length."""
KEPT_BYTES = 4096
"""The start of an over-long game that is kept (for the rejected game's excerpt)."""
BULK_AFTER = 8
"""Blank lines read one by one before the rest of a run of them is skipped in bulk (a bulk skip
peeks at the reader's buffer, which costs more than a few lines)."""
_NONBLANK = re.compile(rb"[^ \t\n\r\x0b\x0c]")
"""A byte that bytes.strip() keeps."""


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
    problem: str | None = None
    """Set when the game is longer than MAX_GAME_BYTES: what is wrong, for its rejection (text
    then holds only the game's first KEPT_BYTES)."""


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


class _Wrapping(io.RawIOBase):
    """A readable raw stream over another binary stream `_inner`; closing it closes that one."""

    def __init__(self, inner: BinaryIO):
        self._inner = inner

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        # BufferedReader.close() closes this reader; the stream under it goes too.
        try:
            self._inner.close()
        finally:
            super().close()


class _ZstdFramesReader(_Wrapping):
    """zstd decompression that reports truncation.

    zstandard's stream_reader returns a silent EOF when the input stops mid-frame; a
    truncated download would then look like a shorter archive. This reader decodes
    frame by frame and raises ArchiveError when the input ends inside a frame.
    """

    def __init__(self, raw: BinaryIO, name: str):
        super().__init__(raw)
        self._name = name
        self._dctx = zstandard.ZstdDecompressor()
        self._obj = self._dctx.decompressobj()
        self._in_frame = False
        self._pending = b""
        self._eof = False

    def readinto(self, buffer) -> int:  # type: ignore[override]
        while not self._pending and not self._eof:
            data = self._inner.read(CHUNK)
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


# Windows-1252 where it defines 0x80-0x9F (euro sign, curly quotes, dashes), Latin-1 for the
# five bytes it leaves undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D).
_CP1252 = {}
for _b in range(0x80, 0xA0):
    try:
        _CP1252[_b] = bytes([_b]).decode("cp1252")
    except UnicodeDecodeError:
        pass


def _decode(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        # Older PGN files are often Windows-1252 (player names with accents, curly quotes, the euro sign).
        return data.decode("latin-1").translate(_CP1252)


class _Text(_Wrapping):
    """The archive's decompressed bytes, UTF-16 (told by its byte-order mark) transcoded to
    UTF-8 as it is read, so the reader sees one encoding. Reads fill the buffer (short only
    at the end), so the first peek holds the archive's first bytes. Closing it closes the
    stream under it."""

    def __init__(self, stream: BinaryIO):
        super().__init__(stream)
        self._decoder: codecs.IncrementalDecoder | None = None
        self._started = False
        self._pending = b""
        self._eof = False

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = len(buffer)
        if self._decoder is None:
            if self._started:
                return self._inner.readinto(buffer)  # type: ignore[attr-defined]
            self._started = True
            first = self._inner.read(n)
            if not first.startswith(UTF16_BOMS):
                buffer[: len(first)] = first
                return len(first)
            self._decoder = codecs.getincrementaldecoder("utf-16")(errors="replace")
            self._pending = self._decoder.decode(first).encode("utf-8")
        while len(self._pending) < n and not self._eof:
            data = self._inner.read(CHUNK)
            self._eof = not data
            self._pending += self._decoder.decode(data, final=self._eof).encode("utf-8")
        out, self._pending = self._pending[:n], self._pending[n:]
        buffer[: len(out)] = out
        return len(out)


def open_text(path: Path) -> io.BufferedReader:
    """The archive's decompressed bytes as UTF-8 (UTF-16 transcoded), for streaming reads."""
    return io.BufferedReader(_Text(open_archive(path)), CHUNK)


def _skip_blank(buffered: io.BufferedReader) -> tuple[int, int]:
    """Consume the blank lines that come next, in bulk (a run of blank lines is read at disk
    speed, in the reader's buffer): the number of newlines and of bytes consumed."""
    newlines = nbytes = 0
    while True:
        buf = buffered.peek(CHUNK)
        if not buf:
            return newlines, nbytes
        m = _NONBLANK.search(buf)
        end = buf.rfind(b"\n", 0, m.start() if m else len(buf)) + 1
        if m is None and end == 0:
            end = len(buf)  # blank bytes without a newline: part of one blank line
        if end == 0:
            return newlines, nbytes
        newlines += buf.count(b"\n", 0, end)
        nbytes += end
        buffered.read(end)
        if m is not None:
            return newlines, nbytes


@dataclass
class _Overlong:
    """A game past MAX_GAME_BYTES: its start, where it began and the bytes it ran to."""

    head: bytes
    line: int
    comment_line: int
    size: int = 0

    def problem(self) -> str:
        comment = ""
        if self.comment_line:
            comment = f"; a '{{' comment opened at line {self.comment_line:,} is still open there"
        return (
            f"the game at line {self.line:,} of the archive is {self.size:,} bytes long, over the bound of "
            f"{MAX_GAME_BYTES:,} bytes for one game (pipeline.ingest.archive.MAX_GAME_BYTES, far above any real game)"
            f"{comment}: its text was skipped, not read; a runaway comment or a damaged archive? Fix or remove the "
            "game and ingest the archive again"
        )


def _raw_game(index: int, lines: list[bytes], big: _Overlong | None, size: int, terminated: bool) -> RawGame:
    if big is None:
        return RawGame(index, _decode(b"".join(lines)).replace("\r\n", "\n"), terminated)
    big.size += size
    return RawGame(index, _decode(big.head).replace("\r\n", "\n"), terminated, big.problem())


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
    # Bytes of the game in `lines`; past MAX_GAME_BYTES they are dropped (kept: the game's
    # start in `big.head`) and counted in `big.size`, and the game is yielded with its problem.
    size = 0
    big: _Overlong | None = None
    # Line numbers: enumerate's count plus the blank lines skipped in bulk (minus the pieces
    # of long lines, which readline gives apart).
    skipped = 0
    start = 0
    # Blank lines seen since the game began: from BULK_AFTER on they are skipped in bulk.
    blanks = 0
    i = 0
    try:
        buffered = io.BufferedReader(_Text(stream), CHUNK)
        # The first 4,096 bytes decide whether this is text at all.
        head = buffered.peek(HEAD_BYTES)[:HEAD_BYTES]
        _check_text(head[len(BOM) :] if head.startswith(BOM) else head, name)
        # A line longer than MAX_GAME_BYTES comes in pieces: its game is over-long anyway.
        readline = partial(buffered.readline, MAX_GAME_BYTES)
        for i, line in enumerate(iter(readline, b""), 1):
            if size >= MAX_GAME_BYTES:
                # The game in hand has grown past the bound: its text goes, its size is counted.
                if big is None:
                    big = _Overlong(b"".join(lines)[:KEPT_BYTES], start, comment_line if in_comment else 0)
                big.size += size
                partial_line = not lines[-1].endswith(b"\n")
                lines = [b"\n"]
                size = 0
                if partial_line:
                    # The rest of a long line: its pieces only move the comment state.
                    skipped -= 1  # enumerate counted the first piece as a line
                    while True:
                        big.size += len(line)
                        if in_movetext and (b"{" in line or b"}" in line):
                            in_comment = _comment_state(line, in_comment)
                            if in_comment and not big.comment_line:
                                big.comment_line = comment_line = i + skipped
                        if line.endswith(b"\n"):
                            break
                        line = readline()
                        if not line:
                            break
                    continue
            stripped = line.strip()
            if not lines:
                # Between games: blank lines and escape lines are skipped (runs of blank lines
                # in bulk); a byte-order mark at the start of a game is dropped (as python-chess does).
                if line.startswith(BOM):
                    while line.startswith(BOM):
                        line = line[len(BOM) :]
                    stripped = line.strip()
                if not stripped:
                    blanks += 1
                    if blanks >= BULK_AFTER:
                        skipped += _skip_blank(buffered)[0]
                        blanks = 0
                    continue
                if line.startswith(b"%"):
                    continue
                lines.append(line)
                size = len(line)
                start = i + skipped
                blanks = 0
                in_movetext = has_moves = not stripped.startswith(b"[")
                in_comment = in_movetext and b"{" in line and _comment_state(line, False)
                if in_comment:
                    comment_line = start
                continue
            if not in_movetext:
                lines.append(line)
                size += len(line)
                if not stripped.startswith(b"["):
                    # The blank line between tags and movetext, or movetext right after the tags.
                    in_movetext = True
                    if stripped:
                        has_moves = True
                        in_comment = b"{" in line and _comment_state(line, False)
                        if in_comment:
                            comment_line = i + skipped
                continue
            # In movetext.
            if not in_comment:
                if not stripped:
                    if has_moves:
                        yield _raw_game(index, lines, big, size, True)
                        index += 1
                        lines = []
                        size = 0
                        big = None
                        in_movetext = False
                    else:
                        blanks += 1
                        if blanks >= BULK_AFTER:
                            skipped += _skip_blank(buffered)[0]
                            blanks = 0
                    continue
                if stripped.startswith(b"["):
                    if _looks_like_tag(stripped):
                        # Next game's tags without a separating blank line.
                        yield _raw_game(index, lines, big, size, True)
                        index += 1
                        lines = [line]
                        size = len(line)
                        big = None
                        start = i + skipped
                        blanks = 0
                        in_movetext = has_moves = False
                        continue
                else:
                    has_moves = True
                lines.append(line)
                size += len(line)
                if b"{" in line:
                    in_comment = _comment_state(line, False)
                    if in_comment:
                        comment_line = i + skipped
                continue
            # In a brace comment: it runs to the next '}', blank lines and tags included.
            lines.append(line)
            size += len(line)
            if not stripped:
                blank_in_comment = True
                blanks += 1
                if blanks >= BULK_AFTER:
                    blanks = 0
                    more, nbytes = _skip_blank(buffered)
                    if more:  # kept as bare newlines, up to the bound
                        skipped += more
                        lines.append(b"\n" * min(more, MAX_GAME_BYTES))
                        size += nbytes
                continue
            if stripped.startswith(b"["):
                if blank_in_comment and _looks_like_tag(stripped):
                    lost.append(i + skipped)  # the tag section of a game the comment swallows
            else:
                has_moves = True
            blank_in_comment = False
            if b"}" in line:
                if lost:
                    notes.swallowed(name, index, comment_line, lost, i + skipped)
                    lost = []
                in_comment = _comment_state(line, True)
                if in_comment:
                    comment_line = i + skipped
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
        if big is None and size >= MAX_GAME_BYTES:
            big = _Overlong(b"".join(lines)[:KEPT_BYTES], start, comment_line if in_comment else 0)
            lines = [b"\n"]
        yield _raw_game(index, lines, big, size, lines[-1].rstrip().endswith(_RESULTS_B) and not in_comment)


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


_RESULTS_B = (b"1-0", b"0-1", b"1/2-1/2", b"*")
