"""EPD suites: the STS points by hand, solved counts, Kaufman's delta-cp against direct engine calls."""

import chess
import chess.engine
import pytest

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.play.suites import (
    EpdPosition,
    SuiteError,
    is_sts,
    kaufman_delta_cp,
    load_epd,
    score_suite,
    solved,
    sts_points,
    sts_theme,
)

STS_LINES = (
    '1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - bm f5; id "STS(v1.0) Undermine.001"; '
    'c0 "f5=10, Be5+=2, Bf2=3, Bg4=2"; c7 "f5 Be5+ Bf2 Bg4"; c8 "10 2 3 2"; c9 "f4f5 d4e5 d4f2 f3g4";\r\n'
    '1n5k/3q3p/pp1p2pB/5r2/1PP1Qp2/P6P/6P1/2R3K1 w - - bm c5; id "STS(v1.0) Undermine.002"; '
    'c0 "c5=10, Qd4+=4, b5=4, g4=3"; c7 "c5 Qd4+ b5 g4"; c8 "10 4 4 3"; c9 "c4c5 e4d4 b4b5 g2g4";\r\n'
    "# a comment line\r\n"
)


def test_sts_points_by_hand(tmp_path):
    path = tmp_path / "mini.epd"
    path.write_bytes(STS_LINES.encode())  # CRLF, as the real file
    positions = load_epd(path)
    assert len(positions) == 2 and is_sts(positions)
    first, second = positions
    assert first.points == {chess.Move.from_uci(u): p for u, p in (("f4f5", 10), ("d4e5", 2), ("d4f2", 3), ("f3g4", 2))}
    # c0 alone (SAN) gives the same points as c8 + c9 (UCI).
    assert sts_points(first.board, {"c0": first.ops["c0"]}) == first.points
    moves = [chess.Move.from_uci("d4f2"), chess.Move.from_uci("g1h1")]  # 3 points, then 0
    s = score_suite(positions, moves)
    assert (s.points, s.max_points, s.solved, s.scored) == (3, 20, 0, 2)
    assert s.themes == {"Undermine": [3, 20, 2]}
    s = score_suite(positions, [chess.Move.from_uci("f4f5"), chess.Move.from_uci("e4d4")])
    assert (s.points, s.solved) == (14, 1)


def test_the_real_sts_file(shared_data):
    positions = load_epd(shared_data / "epd" / "STS1-STS15_LAN_v3.epd")
    assert len(positions) == 1500 and is_sts(positions)
    themes = {}
    for p in positions:
        themes[sts_theme(p.id)] = themes.get(sts_theme(p.id), 0) + 1
    # 15 themes of 100, the one reordered spelling of STS3's name joined with the others.
    assert len(themes) == 15 and set(themes.values()) == {100}
    assert sum(max(p.points.values()) for p in positions) == 15_000


def test_kaufman_solved_counts(shared_data):
    positions = load_epd(shared_data / "epd" / "kaufman.epd")
    assert len(positions) == 25
    assert sum(bool(p.best_moves) for p in positions) == 23 and sum(bool(p.avoid_moves) for p in positions) == 2
    p3 = next(p for p in positions if p.id == "position 03")  # am Rd1
    assert solved(p3, p3.board.parse_san("Rd1")) is False
    other = next(m for m in p3.board.legal_moves if m != p3.board.parse_san("Rd1"))
    assert solved(p3, other) is True
    p1 = positions[0]
    assert solved(p1, p1.board.parse_san("Nf6+")) is True
    assert solved(EpdPosition("x", 0, "x", chess.Board()), chess.Move.from_uci("e2e4")) is None


def test_delta_cp_on_a_known_pair(shared_data, stockfish):
    """Kaufman position 01: Nf6+ (the suite's move) against h3 (a quiet move). delta-cp must be
    the direct engine's score after Nf6+ minus after h3, from White's side."""
    p = load_epd(shared_data / "epd" / "kaufman.epd")[0]
    assert p.board.turn == chess.WHITE
    quiet = p.board.parse_san("h3")
    depth = 12
    with EnginePool(stockfish, workers=1, clear_hash=True) as pool:
        got = kaufman_delta_cp([p], [quiet], pool, Limit("depth", depth))[0]
        same = kaufman_delta_cp([p], [p.best_moves[0]], pool, Limit("depth", depth))[0]
    assert (got.move, got.reference) == ("h3", "Nf6+") and same.delta == 0
    direct = {}
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        for san in ("Nf6+", "h3"):
            b = p.board.copy()
            b.push_san(san)
            info = engine.analyse(b, chess.engine.Limit(depth=depth), game=san)
            direct[san] = info["score"].white().score(mate_score=32000)
    assert got.eval_reference == pytest.approx(max(-2000, min(2000, direct["Nf6+"])), abs=40)
    assert got.eval_move == pytest.approx(max(-2000, min(2000, direct["h3"])), abs=40)
    assert got.delta == got.eval_reference - got.eval_move and got.delta > 50


# A suite as public collections write them: a '#' header, CRLF line ends, blank lines, c0 used
# as the EPD standard's free-text comment (commas, '=' and ';' inside the quotes), an id-only
# position, bm with several moves, am, a full FEN (clock and move number), STS-shaped c0 in SAN
# with a promotion and in UCI, and the lines a hand-edited file gets wrong.
START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"
PUBLIC = [
    "# Test positions, collected 2003; c0 holds the game each comes from",  # 1
    "",  # 2
    f'{START} bm e4 d4 Nf3; id "openings.001"; c0 "Kasparov - Topalov, Wijk aan Zee 1999; R=4, ply=0";',  # 3
    '3r2k1/1p3ppp/2pq4/p1n5/P6P/1P6/1PB2QP1/1K2R3 w - - am Rd1; id "position 03";',  # 4
    '2kr3r/pp3ppp/8/8/8/8/PPP2PPP/2KR3R b - - id "id only";',  # 5
    "   ",  # 6
    '4k3/8/8/8/8/8/8/4R1K1 w - - bm Kf2; id "black in check, white to move";',  # 7: illegal position
    f'{START} bm e5; id "bm illegal here";',  # 8
    f'{START} 0 1 bm Nc3; id "full fen"; c0 "";',  # 9
    '8/4P1k1/8/8/8/8/6K1/8 w - - id "promotion"; c0 "e8=Q=10, e8=N+=2, Kf3=1";',  # 10: STS c0, SAN
    f'{START} id "uci points"; c0 "e2e4=10, d2d4=8";',  # 11: STS c0, UCI
    f'{START} id "bad points"; c0 "e2e5=10, d4=3";',  # 12: STS-shaped, illegal move
    "this line is not EPD at all",  # 13
    '7k/5Q2/6K1/8/8/8/8/8 b - - id "stalemate";',  # 14
    f'{START} id "c9 illegal"; c8 "10 3"; c9 "e2e4 e2e5";',  # 15
    '8/8/8/8/8/8/8/8 w - - id "empty board";',  # 16: illegal position
]


def _write(path, lines, eol="\r\n"):
    path.write_bytes(eol.join(lines).encode() + eol.encode())
    return path


def test_a_public_collection_loads_with_each_bad_line_counted(tmp_path):
    """Before: the free-text c0 made reading the points fail with "invalid literal for int()",
    and any bad line made the whole file fail."""
    from pipeline.play.suites import read_epd

    suite = read_epd(_write(tmp_path / "public.epd", PUBLIC))
    ids = [p.id for p in suite.positions]
    assert ids == ["openings.001", "position 03", "id only", "full fen", "promotion", "uci points"]
    assert [p.line for p in suite.positions] == [3, 4, 5, 9, 10, 11]
    assert [f.line for f in suite.failures] == [7, 8, 12, 13, 14, 15, 16] and suite.lines == 13
    reasons = {f.line: f.reason for f in suite.failures}
    assert "illegal position (opposite check)" in reasons[7]
    assert "illegal position" in reasons[16] and "no white king" in reasons[16]
    assert "illegal san: 'e5'" in reasons[8]
    assert "c0 move 'e2e5'" in reasons[12]
    assert "not an EPD position" in reasons[13]
    assert "no legal move" in reasons[14]
    assert "c9 move e2e5 is not legal" in reasons[15]
    by_id = {p.id: p for p in suite.positions}
    first = by_id["openings.001"]
    # The comment is kept as text, and is not points.
    assert first.comment == "Kasparov - Topalov, Wijk aan Zee 1999; R=4, ply=0" and first.points == {}
    assert [m.uci() for m in first.best_moves] == ["e2e4", "d2d4", "g1f3"]
    assert [m.uci() for m in by_id["position 03"].avoid_moves] == ["e1d1"]
    assert by_id["id only"].best_moves == [] and by_id["id only"].points == {}
    assert by_id["full fen"].board.fen() == chess.Board().fen() and by_id["full fen"].comment == ""
    promo = by_id["promotion"]
    assert promo.comment is None and promo.points == {
        chess.Move.from_uci("e7e8q"): 10,
        chess.Move.from_uci("e7e8n"): 2,
        chess.Move.from_uci("g2f3"): 1,
    }
    assert by_id["uci points"].points == {chess.Move.from_uci("e2e4"): 10, chess.Move.from_uci("d2d4"): 8}
    assert is_sts(suite.positions)
    # Scoring: e4 solves the bm list; the am position is solved by anything but Rd1.
    board_moves = {
        "openings.001": "e2e4",
        "position 03": "c2e4",
        "id only": "c8d8",
        "full fen": "b1c3",
        "promotion": "e7e8q",
        "uci points": "d2d4",
    }
    s = score_suite(suite.positions, [chess.Move.from_uci(board_moves[i]) for i in ids])
    assert (s.points, s.max_points, s.pointed) == (18, 20, 2)
    assert (s.solved, s.scored) == (3, 3)  # openings.001, position 03 and full fen (bm Nc3)
    # The strict reader names the first bad line.
    with pytest.raises(SuiteError, match=r"public\.epd:7: illegal position"):
        load_epd(tmp_path / "public.epd")


def test_a_comment_that_only_looks_like_sts_points():
    board = chess.Board()
    for c0 in (
        "",
        "12",
        "Kasparov-Topalov",
        "1. e4 e5, a classic",
        "best=10 or so",
        "e4=ten",
        "R=4, ply=0",
        "Elo=2700",
        "a=1",
    ):
        assert sts_points(board, {"c0": c0}) == {}, c0
    assert sts_points(board, {"c0": " e4 = 10 ,Nf3=7, "}) == {
        chess.Move.from_uci("e2e4"): 10,
        chess.Move.from_uci("g1f3"): 7,
    }
