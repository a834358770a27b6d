"""The nasty hand-written PGN, compression formats and broken archives."""

import bz2
import gzip
import io
import random

import chess
import chess.pgn
import pytest
import zstandard

from pipeline.ingest.archive import ArchiveError, _comment_state, detect_compression, iter_raw_games
from pipeline.ingest.games import Rejected, process_games, split_game, tokenize_python
from tests.fixtures_pgn import LATIN1_EXPECT, NASTY, nasty_bytes


def _tables(path):
    return process_games("t", list(iter_raw_games(path)))


@pytest.fixture
def nasty(tmp_path):
    p = tmp_path / "nasty.pgn"
    p.write_bytes(nasty_bytes())
    return p


def test_every_nasty_game_lands_once_with_the_expected_outcome(nasty):
    games, rejected, positions = _tables(nasty)
    n_total = len(NASTY) + 2  # + latin-1 game + truncated last game
    assert games.num_rows + rejected.num_rows == n_total
    assert sorted(games.column("game_index").to_pylist() + rejected.column("game_index").to_pylist()) == list(
        range(n_total)
    )
    kept = {r["game_index"]: r for r in games.to_pylist()}
    rej = {r["game_index"]: r for r in rejected.to_pylist()}
    for i, (text, code, facts) in enumerate(NASTY):
        if code is None:
            assert i in kept, f"game {i} rejected: {rej.get(i)}"
            g = kept[i]
            assert g["ply_count"] == facts["plies"]
            for k in ("outcome", "result", "result_movetext", "result_board", "start_fen"):
                if k in facts:
                    assert g[k] == facts[k], (i, k)
            if "moves" in facts:
                assert g["moves_uci"] == facts["moves"]
            assert g["result_mismatch"] == facts.get("mismatch", False)
        else:
            assert i in rej, f"game {i} kept, expected {code}"
            assert rej[i]["reason_code"] == code, rej[i]
            assert rej[i]["reason"]
            assert rej[i]["excerpt"] and rej[i]["excerpt"] in text
            if "ply" in facts:
                assert rej[i]["ply"] == facts["ply"]
    latin = kept[len(NASTY)]
    assert (latin["white"], latin["black"], latin["ply_count"]) == (
        LATIN1_EXPECT["white"],
        LATIN1_EXPECT["black"],
        LATIN1_EXPECT["plies"],
    )
    assert rej[len(NASTY) + 1]["reason_code"] == "truncated"
    # One position per ply plus the start, for every kept game.
    assert positions.num_rows == sum(g["ply_count"] + 1 for g in kept.values())


def test_kept_and_rejected_agree_with_python_chess(nasty):
    """Independent check: python-chess's own reader on each game text."""
    games, rejected, _ = _tables(nasty)
    kept = set(games.column("game_index").to_pylist())
    for i, (text, _code, facts) in enumerate(NASTY):
        game = chess.pgn.read_game(io.StringIO(text))
        pc_ok = (
            not game.errors
            and "960" not in game.headers.get("Variant", "")
            and not any(m == chess.Move.null() for m in game.mainline_moves())
        )
        if facts.get("python_chess_differs"):
            assert pc_ok and i not in kept
            continue
        assert pc_ok == (i in kept), (i, game.errors)
        if pc_ok:
            row = games.filter(games.column("game_index").to_numpy() == i).to_pylist()[0]
            assert row["moves_uci"].split() == [m.uci() for m in game.mainline_moves()] or row["ply_count"] == 0


@pytest.mark.parametrize("fmt", ["plain", "zstd", "gzip", "bzip2", "zstd-misnamed", "gzip-multistream"])
def test_compression_formats_read_the_same(tmp_path, fmt):
    data = nasty_bytes(with_truncated=False)
    reference = tmp_path / "ref.pgn"
    reference.write_bytes(data)
    if fmt == "plain":
        p, blob = tmp_path / "a.pgn", data
    elif fmt == "zstd":
        p, blob = tmp_path / "a.pgn.zst", zstandard.ZstdCompressor().compress(data)
    elif fmt == "gzip":
        p, blob = tmp_path / "a.pgn.gz", gzip.compress(data)
    elif fmt == "bzip2":
        p, blob = tmp_path / "a.pgn.bz2", bz2.compress(data)
    elif fmt == "zstd-misnamed":
        p, blob = tmp_path / "a.pgn", zstandard.ZstdCompressor().compress(data)
    else:
        half = len(data) // 2
        cut = data.index(b"\n[Event", half) + 1
        p, blob = tmp_path / "a.pgn.gz", gzip.compress(data[:cut]) + gzip.compress(data[cut:])
    p.write_bytes(blob)
    expected = _tables(reference)
    got = _tables(p)
    for a, b in zip(expected, got):
        assert a.equals(b)
    assert detect_compression(p) == {"plain": "none", "zstd-misnamed": "zstd", "gzip-multistream": "gzip"}.get(fmt, fmt)


@pytest.mark.parametrize("fmt", ["zstd", "gzip", "bzip2"])
def test_truncated_compressed_archive_is_an_archive_error(tmp_path, fics_search, fmt):
    data = zstandard.ZstdDecompressor().decompress(fics_search.read_bytes(), max_output_size=1 << 30)
    blob = {"zstd": zstandard.ZstdCompressor().compress, "gzip": gzip.compress, "bzip2": bz2.compress}[fmt](data)
    p = tmp_path / f"cut.pgn.{ {'zstd': 'zst', 'gzip': 'gz', 'bzip2': 'bz2'}[fmt] }"
    p.write_bytes(blob[: len(blob) * 2 // 3])
    with pytest.raises(ArchiveError, match="truncated|corrupt"):
        for _ in iter_raw_games(p):
            pass


def test_binary_junk_is_an_archive_error(tmp_path):
    p = tmp_path / "junk.pgn"
    p.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ArchiveError, match="not a PGN"):
        list(iter_raw_games(p))


def test_game_counts_match_python_chess_on_every_shared_archive(shared_data):
    from pipeline.ingest.ingest import count_games_python_chess

    files = sorted(p for p in (shared_data / "pgn").rglob("*") if p.is_file())
    assert len(files) >= 17
    for f in files:
        assert sum(1 for _ in iter_raw_games(f)) == count_games_python_chess(f), f.name


def _comment_state_by_character(line: bytes, in_comment: bool) -> bool:
    for ch in line:
        if in_comment:
            in_comment = ch != ord("}")
        elif ch == ord("{"):
            in_comment = True
        elif ch == ord(";"):
            break
    return in_comment


def test_comment_state_equals_a_character_by_character_scan():
    rng = random.Random(3)
    for _ in range(5000):
        line = bytes(rng.choice(b"{};e4 ") for _ in range(rng.randrange(12)))
        for start in (False, True):
            assert _comment_state(line, start) == _comment_state_by_character(line, start), (line, start)


def _python_tokens(text: str):
    try:
        return tokenize_python(text)
    except Rejected:
        return "rejected"


def test_compiled_tokenizer_equals_the_expressions_on_every_shared_game(shared_data, compiled):
    texts = [
        split_game(raw.text)[1]
        for f in sorted((shared_data / "pgn").rglob("*"))
        if f.is_file()
        for raw in iter_raw_games(f)
    ]
    assert len(texts) > 11_000
    for text in texts:
        ours = compiled.tokenize(text)
        assert ours is not None, text[:200]  # plain movetext: never left to the expressions
        assert ours == _python_tokens(text)


_FRAGMENTS = [
    "1.",
    "12.",
    "3...",
    "1 .",
    "e4",
    "exd5",
    "Nf3",
    "Nbd7",
    "R1e2",
    "Qh4xe1",
    "e8=Q",
    "e8Q",
    "exf8=n",
    "O-O",
    "O-O-O",
    "0-0",
    "0-0-0",
    "1-0",
    "0-1",
    "1/2-1/2",
    "*",
    "{comment}",
    "{a; b}",
    "{unclosed",
    "; rest\n",
    "\n%escape\n",
    "%",
    "$1",
    "$12",
    "!",
    "?!",
    "+",
    "#",
    "=",
    "(",
    ")",
    "--",
    "Z0",
    "0000",
    "N@f6",
    "P",
    "e",
    "1e4",
    "xd5",
    "-e4",
    "e2e4",
    "Kxe1",
    "\u00e9",
    "\t",
    "\x1c",
    "10",
    "1-0-0",
    "$",
    "e4+",
    "Nf3#",
    "b8b",
    ".",
    "9.",
    "a1",
    "h8=K",
    "00009.",
    "10000.",
    "10000...",
    "20000 .",
    "10000",
    "$10000",
    "0000.",
    "100001.",
]


def test_compiled_tokenizer_equals_the_expressions_or_defers(compiled):
    """Random movetext, plausible and not: whenever the compiled tokenizer answers, it is the
    expressions' answer (and when they would reject the text, it defers)."""
    rng = random.Random(5)
    alphabet = "0123456789abcdefghNBRQKOPZx-=+#!?$.{}; \n%*/()@nbrqk"
    answered = 0
    for i in range(40_000):
        if i % 2:
            text = "".join(rng.choice(_FRAGMENTS) + rng.choice(["", " ", "\n"]) for _ in range(rng.randrange(1, 8)))
        else:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14)))
        ours = compiled.tokenize(text)
        if ours is not None:
            answered += 1
            assert ours == _python_tokens(text), repr(text)
    assert answered > 5_000


def test_headers_equal_python_chess_on_every_shared_game(shared_data):
    n = 0
    for f in sorted((shared_data / "pgn").rglob("*")):
        if f.is_file():
            for raw in iter_raw_games(f):
                assert split_game(raw.text)[0] == dict(chess.pgn.read_headers(io.StringIO(raw.text)))
                n += 1
    assert n > 11_000


def _split_game_line_by_line(text: str):
    headers, lines, i = {}, text.split("\n"), 0
    while i < len(lines):
        s = lines[i].strip()
        if s and not lines[i].startswith(("%", ";")):
            if not s.startswith("["):
                break
            m = chess.pgn.TAG_REGEX.match(s)
            if m:
                headers.setdefault(m.group(1), m.group(2))
        i += 1
    return headers, "\n".join(lines[i:])


def test_split_game_equals_a_line_by_line_reading_of_odd_tag_sections():
    rng = random.Random(1)
    lines = [
        '[Event "x"]',
        '[Event "y"]',
        '[Site "a b"]',
        '[W "q\\"x"]',
        '[X  "v"]  ',
        ' [Y "z"]',
        '[Z\t"t"]\t',
        "[bad]",
        '[A "v"] x',
        '[B "v"]\r',
        '[C "a"]"]',
        "",
        "%esc",
        ";c",
        "1. e4",
        '[_Q "v"]',
        '[D "\x0b"]\x0b',
        '[E ""]',
        '[F "\u00e9"]',
    ]
    for _ in range(20_000):
        text = "\n".join(rng.choice(lines) for _ in range(rng.randrange(8))) + rng.choice(["", "\n", "\n\n1. e4 *"])
        assert split_game(text) == _split_game_line_by_line(text), repr(text)


@pytest.mark.parametrize("implementation", ["compiled", "python"])
def test_move_numbers_of_any_length_are_move_numbers(implementation, request):
    """ "10000." holds "0000", the null move's notation: it is a move number all the same."""
    tokenize = request.getfixturevalue("compiled").tokenize if implementation == "compiled" else tokenize_python
    assert tokenize("9999. Nf3 Nf6 10000. Ng1 Ng8 10001. e4 *") == (["Nf3", "Nf6", "Ng1", "Ng8", "e4"], "*")
    assert tokenize("10000... Ng8 100000 . e4 $10000 e5 1-0") == (["Ng8", "e4", "e5"], "1-0")
    assert tokenize_python("1. e4 0000 2. d4 *") == (["e4", "0000", "d4"], "*")  # a null move stays one
