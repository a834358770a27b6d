"""Hand-written PGN with the nasty cases, and what each game must become.

Each entry: (pgn text, expected reject reason_code or None for a kept game, extra facts).
"""

NASTY = [
    # 0: comments, NAGs, nested variations, rest-of-line comment, escape line.
    (
        '[Event "comments"]\n[Site "?"]\n[White "A"]\n[Black "B"]\n[Result "1-0"]\n\n'
        "1. e4 {best by test} e5 $1 2. Nf3 (2. f4 exf4 (2... d5) 3. Nf3) 2... Nc6 ; rest of line 3. Qh5\n"
        "%escaped line 4. Qh5\n"
        "3. Bb5 a6!? 4. Ba4 Nf6 1-0\n",
        None,
        {"plies": 8, "moves": "e2e4 e7e5 g1f3 b8c6 f1b5 a7a6 b5a4 g8f6"},
    ),
    # 1: illegal move (the king cannot jump to e3).
    ('[Event "illegal"]\n[Result "*"]\n\n1. e4 e5 2. Ke3 Nc6 *\n', "illegal_move", {"ply": 2}),
    # 2: ambiguous SAN (both knights reach d2).
    ('[Event "ambiguous"]\n[Result "*"]\n\n1. d3 d6 2. Nf3 Nf6 3. Nd2 *\n', "ambiguous_move", {"ply": 4}),
    # 3: FEN setup, replayed from that position.
    (
        '[Event "setup"]\n[SetUp "1"]\n[FEN "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"]\n[Result "*"]\n\n1. e4 Kd7 2. Kd2 *\n',
        None,
        {"plies": 3, "start_fen": "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"},
    ),
    # 4: Chess960 is not standard chess.
    (
        '[Event "960"]\n[Variant "Chess960"]\n'
        '[FEN "bqnb1rkr/pp3ppp/3ppn2/2p5/5P2/P2P4/NPP1P1PP/BQ1BNRKR w HFhf - 2 9"]\n'
        '[SetUp "1"]\n[Result "*"]\n\n9. g3 *\n',
        "variant",
        {},
    ),
    # 5: Result tag says draw, movetext says 0-1: kept, flagged, outcome from the movetext.
    (
        '[Event "mismatch"]\n[Result "1/2-1/2"]\n\n1. e4 e5 2. Nf3 Nc6 0-1 {White forfeits on time}\n',
        None,
        {"plies": 4, "mismatch": True, "outcome": "0-1", "result": "1/2-1/2", "result_movetext": "0-1"},
    ),
    # 6: checkmate on the board, but tag and movetext claim 1-0.
    (
        '[Event "mate"]\n[Result "1-0"]\n\n1. f3 e5 2. g4 Qh4# 1-0\n',
        None,
        {"plies": 4, "mismatch": True, "outcome": "0-1", "result_board": "0-1"},
    ),
    # 7: zero-move game.
    (
        '[Event "zero"]\n[White "X"]\n[Black "Y"]\n[Result "1-0"]\n\n{Black forfeits by disconnection} 1-0\n',
        None,
        {"plies": 0, "outcome": "1-0"},
    ),
    # 8: FEN that is no legal position (no kings); python-chess reads it without complaint.
    (
        '[Event "badfen"]\n[SetUp "1"]\n[FEN "8/8/8/8/8/8/8/8 w - - 0 1"]\n[Result "*"]\n\n*\n',
        "bad_fen",
        {"python_chess_differs": True},
    ),
    # 9: null move in the mainline.
    ('[Event "null"]\n[Result "*"]\n\n1. e4 -- 2. d4 *\n', "unsupported_move", {"ply": 1}),
    # 10: promotion with capture, castling both sides, en passant.
    (
        '[Event "special"]\n[Result "*"]\n\n1. e4 d5 2. exd5 c6 3. dxc6 Nf6 4. cxb7 Nbd7 5. bxa8=Q e5 '
        "6. Nf3 Bd6 7. Be2 O-O 8. O-O h5 9. d4 h4 10. g4 hxg3 *\n",
        None,
        {"plies": 20},
    ),
    # 11: long algebraic move to a square the pawn cannot reach.
    ('[Event "badlan"]\n[Result "*"]\n\n1. e2e5 e5 *\n', "illegal_move", {"ply": 0}),
    # 12: bad SAN: "Xa6" is no move. python-chess silently reads its "a6" as a pawn move;
    # we reject the game instead of guessing.
    (
        '[Event "badsan"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 Xa6 *\n',
        "unparsable_move",
        {"python_chess_differs": True},
    ),
]

# A latin-1 encoded game (player name with an umlaut), appended as bytes.
LATIN1 = (
    '[Event "latin1"]\n[White "M\u00fcller"]\n[Black "Jos\u00e9"]\n[Result "1/2-1/2"]\n\n1. d4 d5 1/2-1/2\n'.encode(
        "latin-1"
    )
)
LATIN1_EXPECT = {"white": "M\u00fcller", "black": "Jos\u00e9", "plies": 2}

# A truncated last game: the file stops mid-move.
TRUNCATED = b'[Event "truncated"]\n[Result "1-0"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb'


def nasty_bytes(with_truncated: bool = True) -> bytes:
    body = "\n".join(text for text, _, _ in NASTY).encode("utf-8") + b"\n" + LATIN1 + b"\n"
    return body + (TRUNCATED if with_truncated else b"")


# The same game twice (one game for the split), a decisive game, a mate, a draw.
RATED_GAMES = """[Event "g1"]\n[White "a"]\n[Black "b"]\n[WhiteElo "2300"]\n[BlackElo "2200"]\n[Result "1-0"]

1. e4 e5 2. Nf3 Nc6 3. Bc4 Nd4 4. Nxe5 Qg5 5. Nxf7 Qxg2 6. Rf1 Qxe4+ 7. Be2 Nf3# 0-1

[Event "g1 again"]\n[White "a"]\n[Black "b"]\n[WhiteElo "2300"]\n[BlackElo "2200"]\n[Result "0-1"]

1. e4 e5 2. Nf3 Nc6 3. Bc4 Nd4 4. Nxe5 Qg5 5. Nxf7 Qxg2 6. Rf1 Qxe4+ 7. Be2 Nf3# 0-1

[Event "g2"]\n[White "c"]\n[Black "d"]\n[WhiteElo "2100"]\n[BlackElo "2050"]\n[Result "1-0"]

1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 5. e3 O-O 6. Nf3 h6 7. Bh4 b6 8. cxd5 exd5 1-0

[Event "g3"]\n[White "e"]\n[Black "f"]\n[WhiteElo "1900"]\n[BlackElo "2400"]\n[Result "1/2-1/2"]

1. c4 e5 2. Nc3 Nf6 3. Nf3 Nc6 4. g3 d5 5. cxd5 Nxd5 1/2-1/2
"""
