"""Sabatelli's 20 match openings (thesis, Appendix A), the default opening set of matches.

As ../shared/data/openings/README.md corrects them: the digit 1 where the printed list has the
letter l (positions 6, 11, 12, 17, 20), castling rights kq for position 15 and - for 18.
Each is played twice in a match, colours swapped.
"""

from __future__ import annotations

import chess

from pipeline.play.suites import EpdPosition

SABATELLI_20 = (
    "r1bqkbnr/pppp1ppp/2n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R w KQkq -",
    "r1bqkbnr/pppp1ppp/2n5/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq -",
    "r1bqkbnr/pppp1ppp/2n5/4p3/3PP3/5N2/PPP2PPP/RNBQKB1R w KQkq -",
    "rnbqkbnr/pppp1p1p/8/6p1/3PPp1P/5N2/PPP3P1/RNBQKB1R w KQkq -",
    "rnbqkbnr/ppp2ppp/8/3pp3/4PP2/8/PPPP2PP/RNBQKBNR w KQkq -",
    "rnbqkb1r/1p2pppp/p2p1n2/8/3NP3/2N5/PPP2PPP/R1BQKB1R w KQkq -",
    "r1bqkbnr/pp1ppppp/8/8/3QP3/8/PPP2PPP/RNB1KB1R w KQkq -",
    "r1bqkbnr/pp1ppp1p/2n3p1/8/3NP3/8/PPP2PPP/RNBQKB1R w KQkq -",
    "rn1qkbnr/pp2pppb/2p4p/7P/3P4/6N1/PPP2PP1/R1BQKBNR w KQkq -",
    "rnbqkbnr/pp3ppp/4p3/2ppP3/3P4/5N2/PPP2PPP/RNBQKB1R w KQkq -",
    "rnbqkb1r/ppp1pp1p/3p1np1/8/3PPP2/5N2/PPP3PP/RNBQKB1R w KQkq -",
    "rnbqkb1r/pp3ppp/2p1pn2/3p4/2PP4/4PN2/PP3PPP/RNBQKB1R w KQkq -",
    "rnbqkbnr/ppp2ppp/8/4P3/2P5/4p3/PP3PPP/RNBQKBNR w KQkq -",
    "rnbqk2r/ppp1ppbp/3p1np1/8/2PPP3/2N2N2/PP3PPP/R1BQKB1R w KQkq -",
    "rn1qk2r/3pppbp/5np1/2pP4/4P3/5NP1/PP3P1P/RNBQ1K1R w kq -",
    "rnbqk1nr/ppp2ppp/3b4/8/8/5N2/PPPPP1PP/RNBQKB1R w KQkq -",
    "rn1qkb1r/ppp2ppp/4bn2/8/3P4/2N5/PPP2PPP/R1BQKBNR w KQkq -",
    "rnbq1rk1/pp2ppbp/3p1np1/2p5/2P5/2NP1NP1/PP2PPBP/R1BQ1RK1 w - -",
    "rn1qkbnr/pbpp1ppp/1p2p3/8/8/3P1NP1/PPP1PPBP/RNBQK2R w KQkq -",
    "rnbqkb1r/pppppppp/5n2/6B1/3P4/8/PPP1PPPP/RN1QKBNR w KQkq -",
)


def sabatelli_openings() -> list[EpdPosition]:
    return [
        EpdPosition("openings", i, f"sabatelli.{i + 1:02d}", chess.Board.from_epd(epd)[0])
        for i, epd in enumerate(SABATELLI_20)
    ]
