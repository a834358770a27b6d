"""EPD suites: the STS points by hand, solved counts, Kaufman's delta-cp against direct engine calls."""

import chess
import chess.engine
import pytest

from pipeline.engine import EnginePool, Limit
from pipeline.suites import (EpdPosition, is_sts, kaufman_delta_cp, load_epd, score_suite, solved, sts_points,
                             sts_theme)

STS_LINES = (
    '1kr5/3n4/q3p2p/p2n2p1/PppB1P2/5BP1/1P2Q2P/3R2K1 w - - bm f5; id "STS(v1.0) Undermine.001"; '
    'c0 "f5=10, Be5+=2, Bf2=3, Bg4=2"; c7 "f5 Be5+ Bf2 Bg4"; c8 "10 2 3 2"; c9 "f4f5 d4e5 d4f2 f3g4";\r\n'
    '1n5k/3q3p/pp1p2pB/5r2/1PP1Qp2/P6P/6P1/2R3K1 w - - bm c5; id "STS(v1.0) Undermine.002"; '
    'c0 "c5=10, Qd4+=4, b5=4, g4=3"; c7 "c5 Qd4+ b5 g4"; c8 "10 4 4 3"; c9 "c4c5 e4d4 b4b5 g2g4";\r\n'
    '# a comment line\r\n'
)


def test_sts_points_by_hand(tmp_path):
    path = tmp_path / "mini.epd"
    path.write_bytes(STS_LINES.encode())  # CRLF, as the real file
    positions = load_epd(path)
    assert len(positions) == 2 and is_sts(positions)
    first, second = positions
    assert first.points == {chess.Move.from_uci(u): p for u, p in
                            (("f4f5", 10), ("d4e5", 2), ("d4f2", 3), ("f3g4", 2))}
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
