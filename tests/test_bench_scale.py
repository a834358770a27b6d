"""benchmarks/scale.py (issue 38): the games it makes are legal, start with the real game's
opening and end by the rules or at a length; the archive is a function of the seed whatever the
number of processes; its pieces (distinct fraction, quantiles, the archive split for pgn-extract)
against independent counts; and the whole harness at a tiny size."""

import io
import subprocess
import sys
from pathlib import Path

import chess
import chess.pgn
import pytest

from benchmarks import scale
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store import duck
from pipeline.store.store import Store

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "scale.py"

REAL = """[Event "FICS rated standard game"]
[Site "FICS freechess.org"]
[White "a"]
[Black "b"]
[WhiteElo "2100"]
[BlackElo "2050"]
[Date "2022.01.02"]
[Result "1-0"]

1. e4 {a comment} e5 2. Nf3 Nc6 (2... d6 3. d4) 3. Bb5 a6 $1 4. Ba4 Nf6 5. O-O Be7
6. Re1 b5 7. Bb3 d6 8. c3 O-O 9. h3 Nb8 10. d4 Nbd7 11. c4 c6 12. cxb5 axb5 13. Nc3 Bb7
14. Bg5 b4 15. Nb1 h6 16. Bh4 c5 17. dxe5 Nxe4 18. Bxe7 Qxe7 19. exd6 Qf6 1-0

[Event "x"]
[White "c"]
[Black "d"]
[Result "0-1"]

1. f3 e5 2. g4 Qh4# 0-1

[Event "y"]
[White "e"]
[Black "f"]
[Result "1/2-1/2"]

1. d4 d5 2. c4 c6 3. Nf3 Nf6 4. Nc3 dxc4 5. a4 Bf5 6. e3 e6 7. Bxc4 Bb4 8. O-O O-O
9. Qe2 Nbd7 10. e4 Bg6 11. Bd3 Bh5 12. e5 Nd5 13. Nxd5 cxd5 14. Qe3 Bg6 15. Ng5 Re8 1/2-1/2
"""


def _texts() -> list[str]:
    first, *rest = REAL.strip().split("\n\n[Event")
    return [first] + ["[Event" + t for t in rest]


def _pool() -> list[scale.RealGame]:
    return [scale.parse_real_game(text) for text in _texts()]


def test_a_real_game_is_read_as_python_chess_reads_it():
    for g, text in zip(_pool(), _texts()):
        game = chess.pgn.read_game(io.StringIO(text))
        board = game.board()
        sans = [board.san_and_push(move) for move in game.mainline_moves()]
        assert g.plies == len(sans) and list(g.opening) == sans[: scale.CUT_MAX_PLIES]
        assert dict(g.tags)["Result"] == game.headers["Result"]


def test_made_games_are_legal_start_with_a_real_opening_and_end_by_the_rules_or_a_real_length():
    pool = _pool()
    openings = [p.opening for p in pool]
    lengths = {p.plies for p in pool}
    by_rules = 0
    for i in range(60):
        made = scale.make_game(i, 7, pool)
        game = chess.pgn.read_game(io.StringIO(made.pgn))
        assert not game.errors, (i, game.errors)  # python-chess found every move legal
        moves = list(game.mainline_moves())
        assert made.positions == len(moves) + 1
        board = game.board()
        sans = [board.san_and_push(m) for m in moves]
        assert any(tuple(sans[: len(made.prefix)]) == o[: len(made.prefix)] for o in openings)
        assert len(made.prefix) <= scale.CUT_MAX_PLIES
        outcome = board.outcome()
        if outcome is not None:
            by_rules += 1
            assert made.ended_by_rules and game.headers["Result"] == outcome.result()
        else:  # stopped at a length drawn from the real games (or the real prefix's own length)
            assert len(moves) in lengths or len(moves) == len(made.prefix), (i, len(moves))
            assert game.headers["Result"] in scale.RESULTS
    assert by_rules > 0  # random play mates, stalemates or runs out of material within 19-43 plies


def test_the_archive_is_a_function_of_the_seed_whatever_the_processes(tmp_path):
    pool = _pool()
    one, two, other = tmp_path / "one.pgn", tmp_path / "two.pgn", tmp_path / "other.pgn"
    a = scale.generate(one, 3 * scale.CHUNK_GAMES * 10, 5, pool, workers=1)
    b = scale.generate(two, 3 * scale.CHUNK_GAMES * 10, 5, pool, workers=2)
    scale.generate(other, 3 * scale.CHUNK_GAMES * 10, 6, pool, workers=1)
    assert one.read_bytes() == two.read_bytes() and (a.games, a.positions) == (b.games, b.positions)
    assert one.read_bytes() != other.read_bytes()
    assert a.positions >= 3 * scale.CHUNK_GAMES * 10 > a.positions - 200  # stops at the first game past it
    assert one.read_text().count("[Event ") == a.games


def test_the_distinct_fraction_counts_positions_as_python_chess_tells_them_apart(tmp_path):
    archive = tmp_path / "a.pgn"
    made = scale.generate(archive, 4000, 2, _pool(), workers=1)
    store = Store(tmp_path / "store").ensure()
    ingest_archive(store, "a", archive, IngestConfig(workers=1))
    seen, n = set(), 0
    with open(archive) as f:
        while (game := chess.pgn.read_game(f)) is not None:
            board = game.board()
            for move in [None, *game.mainline_moves()]:
                if move is not None:
                    board.push(move)
                seen.add(" ".join(board.fen(en_passant="legal").split()[:4]))
                n += 1
    with duck.read_only_connection(store) as con:
        assert scale.distinct_fraction(con) == (n, len(seen)) == (made.positions, len(seen))
    assert len(seen) < n  # the real openings repeat


def test_nearest_rank_quantiles():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert [scale.percentile(values, q) for q in (0.0, 0.2, 0.5, 0.95, 1.0)] == [1.0, 1.0, 3.0, 5.0, 5.0]
    assert scale.percentile(list(range(1, 201)), 0.95) == 190


def test_the_archive_is_split_at_game_boundaries_into_the_same_bytes(tmp_path):
    archive = tmp_path / "a.pgn"
    made = scale.generate(archive, 3000, 3, _pool(), workers=1)
    (tmp_path / "parts").mkdir()
    parts = scale.split_archive(archive, 4, tmp_path / "parts")
    assert len(parts) == 4
    assert b"".join(p.read_bytes() for p in parts) == archive.read_bytes()
    assert all(p.read_bytes().startswith(b"[Event ") for p in parts)
    assert sum(p.read_text().count("[Event ") for p in parts) == made.games


def test_the_harness_at_a_tiny_size_prints_every_figure_and_leaves_nothing(fics_search, tmp_path):
    args = ["--positions", "3000", "--sample", "6", "--data", str(fics_search), "--tmp", str(tmp_path)]
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for figure in ("distinct fraction", "(a) positions on disk", "(b) /api/position", "(c) shard 0 pending"):
        assert figure in r.stdout, r.stdout
    assert r.stdout.count("(d) games by opening") == 2 and "(e) ours, 1 worker" in r.stdout
    assert "(f) peak RSS, ingest on 1 worker" in r.stdout and "harness:" in r.stdout
    assert r.stdout.count("PASS") + r.stdout.count("FAIL") >= 5
    assert list(tmp_path.iterdir()) == []  # the archive and the store are gone


@pytest.mark.parametrize(
    "args, says",
    [
        (["--data", "/nonexistent/pgn"], "/nonexistent/pgn not found: point --data at real PGN archives"),
        (["--positions", "0"], "--positions and --gen-workers must be at least 1"),
    ],
)
def test_bad_arguments_get_one_line(args, says):
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and says in r.stderr
