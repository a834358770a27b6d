"""Hostile archives written by the tests: NUL bytes, byte-order marks, unclosed comments,
truncated compression (issue 13, items 13-16)."""

import builtins
import bz2
import gzip
import io

import chess.pgn
import pytest
import zstandard

from pipeline.ingest.archive import ArchiveError, ArchiveNotes, iter_raw_games
from pipeline.ingest.games import process_games
from pipeline.ingest.ingest import IngestConfig, count_games_python_chess, ingest_archive
from pipeline.store.store import Store

BOM = b"\xef\xbb\xbf"
COMPRESS = {
    "plain": lambda b: b,
    "zstd": lambda b: zstandard.ZstdCompressor().compress(b),
    "bzip2": bz2.compress,
    "gzip": gzip.compress,
}
SUFFIX = {"plain": "pgn", "zstd": "pgn.zst", "bzip2": "pgn.bz2", "gzip": "pgn.gz"}


def _game(i: int, white: str = "w", movetext: str = "1. e4 e5 2. Nf3 Nc6 *") -> str:
    return f'[Event "game {i}"]\n[Site "?"]\n[White "{white}"]\n[Black "b"]\n[Result "*"]\n\n{movetext}\n'


def _python_chess_games(text: str) -> list[dict]:
    """Every game's headers as python-chess reads the text."""
    out, handle = [], io.StringIO(text)
    while (headers := chess.pgn.read_headers(handle)) is not None:
        out.append(dict(headers))
    return out


def _tables(path):
    return process_games("t", list(iter_raw_games(path)))


# ---- NUL bytes (item 13) ----------------------------------------------------------------------


def test_nul_in_the_first_4096_bytes_makes_the_archive_binary_even_past_the_first_line(tmp_path):
    p = tmp_path / "nul-head.pgn"
    p.write_bytes(_game(0).encode() + _game(1, white="nul\x00here").encode())
    assert p.read_bytes().index(b"\x00") < 4096 and p.read_bytes().index(b"\n") < p.read_bytes().index(b"\x00")
    with pytest.raises(ArchiveError, match=r"not a PGN text file \(NUL bytes in the first 4,096 bytes\)"):
        list(iter_raw_games(p))


@pytest.mark.parametrize("where", ["tag value", "movetext", "between games"])
def test_nul_later_in_the_archive_rejects_that_game_and_keeps_the_others(tmp_path, where):
    head = "".join(_game(i) + "\n" for i in range(60))
    assert len(head) > 4096
    if where == "tag value":
        bad = _game(60, white="nul\x00here")
    elif where == "movetext":
        bad = _game(60, movetext="1. e4 e5 {\x00\x00} 2. Nf3 *")
    else:
        bad = "\x00\x00\x00\n" + _game(60)
    text = head + bad + "\n" + _game(61)
    p = tmp_path / "nul.pgn"
    p.write_bytes(text.encode())
    games, rejected, _ = _tables(p)
    rows = rejected.to_pylist()
    assert [r["reason_code"] for r in rows] == ["binary_data"], rows
    assert "NUL" in rows[0]["reason"] and "\x00" not in rows[0]["excerpt"]
    assert rows[0]["game_index"] == 60
    # Every other game is kept (a junk line between games is a game of its own, as python-chess
    # counts it too), and no stored text holds a NUL.
    kept = [f"game {i}" for i in range(60)] + (["game 60"] if where == "between games" else []) + ["game 61"]
    assert games.column("event").to_pylist() == kept
    for col in ("event", "white", "black", "moves_uci"):
        assert not any("\x00" in (v or "") for v in games.column(col).to_pylist())
    assert games.num_rows + rejected.num_rows == count_games_python_chess(p) == len(kept) + 1


# ---- Byte-order mark (item 15) ----------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(COMPRESS))
def test_a_leading_byte_order_mark_is_stripped_also_after_decompression(tmp_path, fmt):
    text = "".join(_game(i) + "\n" for i in range(3))
    plain = tmp_path / "plain.pgn"
    plain.write_bytes(text.encode())
    p = tmp_path / f"bom.{SUFFIX[fmt]}"
    p.write_bytes(COMPRESS[fmt](BOM + text.encode()))
    expected = _python_chess_games(text)
    games, rejected, positions = _tables(p)
    assert rejected.num_rows == 0, rejected.to_pylist()
    assert games.num_rows == len(expected) == 3
    assert games.column("event").to_pylist()[0] == expected[0]["Event"] == "game 0"
    for a, b in zip(_tables(plain), (games, rejected, positions)):
        assert a.equals(b)
    assert count_games_python_chess(p) == 3  # the reconciliation counts the same


def test_byte_order_marks_of_concatenated_files_are_stripped_as_python_chess_does(tmp_path):
    """`cat a.pgn b.pgn` of two files saved with a BOM: python-chess drops a BOM at the start
    of each game, and so do we."""
    a = "".join(_game(i) + "\n" for i in range(2))
    b = "".join(_game(i) + "\n" for i in range(2, 4))
    p = tmp_path / "cat.pgn"
    p.write_bytes(BOM + a.encode() + BOM + b.encode())
    games, rejected, _ = _tables(p)
    assert rejected.num_rows == 0, rejected.to_pylist()
    assert games.column("event").to_pylist() == [g["Event"] for g in _python_chess_games(p.read_bytes().decode())]
    assert games.column("event").to_pylist() == [f"game {i}" for i in range(4)]


# ---- Unclosed comments (item 16) ---------------------------------------------------------------


def _unclosed_archive() -> tuple[str, dict]:
    """Game 1 opens a comment it never closes; per PGN it runs to the '}' in game 3, so the
    tag sections of games 2 and 3 are inside it. Line numbers of the facts, 1-based."""
    games = [
        _game(0),
        _game(1, movetext="1. e4 {oops, no closing brace e5 2. Nf3 *"),
        _game(2, movetext="1. d4 d5 *"),
        _game(3, movetext="1. c4 {the first closing brace} e5 *"),
        _game(4),
    ]
    text = "\n".join(games)
    lines = text.split("\n")
    facts = {
        "open": 1 + next(i for i, ln in enumerate(lines) if "{oops" in ln),
        "lost_tags": [1 + i for i, ln in enumerate(lines) if ln in ('[Event "game 2"]', '[Event "game 3"]')],
        "close": 1 + next(i for i, ln in enumerate(lines) if "closing brace}" in ln),
    }
    return text, facts


def test_an_unclosed_comment_that_swallows_games_is_reported_with_its_line(tmp_path):
    text, facts = _unclosed_archive()
    p = tmp_path / "unclosed.pgn"
    p.write_text(text)
    notes = ArchiveNotes()
    raws = list(iter_raw_games(p, notes))
    # python-chess reads the same three games (it swallows the same two)...
    assert len(raws) == len(_python_chess_games(text)) == 3
    # ... and we say so: the two lost tag sections, and where the comment opens and closes.
    assert notes.games_in_unclosed_comments == 2
    [w] = notes.warnings
    assert w.line == facts["open"]
    for n in (facts["open"], *facts["lost_tags"], facts["close"]):
        assert f"line {n}" in w.message or f"{n}" in w.message, (n, w.message)
    assert "game_index 1" in w.message and "2 games" in w.message
    # The swallowed games plus the ones read are every tag section of the file.
    assert len(raws) + notes.games_in_unclosed_comments == text.count('[Event "')


def test_ingest_reports_the_warning_and_counts_the_lost_games(tmp_path):
    text, facts = _unclosed_archive()
    p = tmp_path / "unclosed.pgn"
    p.write_text(text)
    stats = ingest_archive(Store(tmp_path / "store").ensure(), "u", p, IngestConfig(workers=1))
    assert stats.games + stats.rejected == count_games_python_chess(p) == 3
    assert stats.notes.games_in_unclosed_comments == 2
    assert [w.line for w in stats.notes.warnings] == [facts["open"]]


def test_an_unclosed_comment_to_the_end_of_the_archive_is_reported(tmp_path):
    text = _game(0) + "\n" + _game(1, movetext="1. e4 {never closed e5 *") + "\n" + _game(2) + "\n" + _game(3)
    p = tmp_path / "eof.pgn"
    p.write_text(text)
    notes = ArchiveNotes()
    raws = list(iter_raw_games(p, notes))
    assert len(raws) == 2 and not raws[1].terminated
    assert notes.games_in_unclosed_comments == 2
    [w] = notes.warnings
    assert "end of the archive" in w.message


def test_a_long_comment_with_blank_lines_but_no_tags_is_no_warning(tmp_path):
    text = _game(0, movetext="1. e4 {a long note\n\nover\n\n[several] paragraphs\n\n} e5 *") + "\n" + _game(1)
    p = tmp_path / "fine.pgn"
    p.write_text(text)
    notes = ArchiveNotes()
    assert len(list(iter_raw_games(p, notes))) == 2
    assert notes.warnings == [] and notes.games_in_unclosed_comments == 0


# ---- Truncated compression (item 14) ------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["bzip2", "gzip", "zstd"])
def test_a_truncated_stream_says_so_in_one_clear_line_without_a_raw_cause(tmp_path, fmt):
    """The CLI prints the innermost error of a failed run's cause chain, so the ArchiveError
    must end the chain (a raw EOFError behind it is what the user saw)."""
    data = "".join(_game(i) + "\n" for i in range(3000)).encode()
    blob = COMPRESS[fmt](data)
    p = tmp_path / f"cut.{SUFFIX[fmt]}"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ArchiveError) as e:
        list(iter_raw_games(p))
    message = str(e.value)
    assert f"{fmt} stream is truncated" in message and "download or copy it again" in message, message
    assert e.value.__cause__ is None and (e.value.__context__ is None or e.value.__suppress_context__)


@pytest.mark.parametrize("kind", ["zstd", "gzip", "bz2", "none"])
def test_a_reader_stopped_after_one_game_closes_the_archive_file(tmp_path, kind, monkeypatch):
    # A consumer that stops early (ingest's --max-games, the explorer's sample) closes the game
    # iterator; the archive's file must be closed with it, not left to the garbage collector.
    text = b'[Event "a"]\n\n1. e4 e5 1-0\n\n[Event "b"]\n\n1. d4 d5 0-1\n'
    pack = {"zstd": zstandard.ZstdCompressor().compress, "gzip": gzip.compress, "bz2": bz2.compress}
    path = tmp_path / f"two.pgn.{kind}"
    path.write_bytes(pack.get(kind, lambda b: b)(text))
    opened = []
    real_open = open

    def spying_open(*args, **kwargs):
        f = real_open(*args, **kwargs)
        if str(args[0]) == str(path):
            opened.append(f)
        return f

    monkeypatch.setattr(builtins, "open", spying_open)
    games = iter_raw_games(path)
    next(games)
    games.close()
    monkeypatch.undo()
    assert opened, "the archive was not opened through open()"
    assert all(f.closed for f in opened)
