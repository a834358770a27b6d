"""The fast replay against python-chess: every position of real games, random games, illegal moves.

Every test runs twice: with the compiled loop (pipeline/ingest/_replay.c) and with the Python one.
"""

import functools
import io
import random

import chess
import chess.pgn
import chess.polyglot
import numpy as np
import pytest

from pipeline.ingest import encoding
from pipeline.ingest import replay as replay_module
from pipeline.ingest.archive import RawGame, iter_raw_games
from pipeline.ingest.games import process_games, split_game, tokenize
from pipeline.ingest.replay import ReplayError, State, replay


@pytest.fixture(params=["compiled", "python"], autouse=True)
def implementation(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(replay_module, "compiled", None)
    else:
        request.getfixturevalue("compiled")
    return request.param


def _expected_rows(board: chess.Board, moves: list[chess.Move]):
    """Per-position facts straight from python-chess."""
    rows = []
    for k in range(len(moves) + 1):
        planes = b"".join(board.pieces_mask(pt, c).to_bytes(8, "little") for c in (True, False) for pt in range(1, 7))
        rows.append(
            (
                chess.polyglot.zobrist_hash(board),
                planes,
                "w" if board.turn else "b",
                board.halfmove_clock,
                board.fullmove_number,
                board.is_check(),
                board.fen(),
            )
        )
        if k < len(moves):
            board.push(moves[k])
    return rows


@functools.lru_cache(maxsize=1)  # the two implementations' tests run one after the other
def _expected_of(games: tuple[tuple[str | None, str | None], ...]) -> list[tuple]:
    """python-chess's rows of every position of the games ((start_fen, moves_uci) each), in
    order: worked out once for both implementations, which read the same games."""
    rows = []
    for start_fen, moves_uci in games:
        board = chess.Board(start_fen) if start_fen else chess.Board()
        rows += _expected_rows(board, [chess.Move.from_uci(u) for u in moves_uci.split()] if moves_uci else [])
    return rows


def _check_against_python_chess(games, positions, n_min):
    pos = positions.to_pydict()
    expected = _expected_of(tuple(zip(games.column("start_fen").to_pylist(), games.column("moves_uci").to_pylist())))
    for i, (key, planes, stm, hm, fm, check, fen) in enumerate(expected):
        assert pos["position_key"][i] == key
        assert pos["planes"][i] == planes
        assert (
            pos["side_to_move"][i],
            pos["halfmove_clock"][i],
            pos["fullmove_number"][i],
            pos["is_check"][i],
        ) == (stm, hm, fm, check)
        rebuilt = encoding.fen_from_row(pos["planes"][i], stm, pos["castling"][i], pos["ep_square"][i], hm, fm)
        assert rebuilt == fen
    assert len(expected) == positions.num_rows >= n_min


def test_real_fics_positions_equal_python_chess(fics_2022):
    games, rejected, positions = process_games("t", list(iter_raw_games(fics_2022)))
    assert rejected.num_rows == 0
    _check_against_python_chess(games, positions, 160_000)


def test_moves_equal_python_chess_read_game(fics_search):
    raws = list(iter_raw_games(fics_search))
    games, _, _ = process_games("t", raws)
    ours = games.column("moves_uci").to_pylist()
    for raw, mine in zip(raws, ours):
        g = chess.pgn.read_game(io.StringIO(raw.text))
        assert mine == " ".join(m.uci() for m in g.mainline_moves())


def _random_game(rng: random.Random, max_plies=200):
    board = chess.Board()
    sans = []
    while not board.is_game_over() and len(sans) < max_plies:
        moves = list(board.legal_moves)
        # Prefer captures, promotions and castling so the rare paths get exercised.
        special = [m for m in moves if board.is_capture(m) or m.promotion or board.is_castling(m)]
        m = rng.choice(special if special and rng.random() < 0.6 else moves)
        sans.append(board.san(m))
        board.push(m)
    return sans


@pytest.mark.slow  # 300 random games checked move by move against python-chess: 5 to 7 s per implementation
def test_random_games_with_every_special_move_equal_python_chess():
    rng = random.Random(7)
    texts = []
    for i in range(300):
        sans = _random_game(rng)
        body = " ".join(f"{j // 2 + 1}. {s}" if j % 2 == 0 else s for j, s in enumerate(sans))
        texts.append(f'[Event "random {i}"]\n[Result "*"]\n\n{body} *\n')
    raws = [RawGame(i, t, True) for i, t in enumerate(texts)]
    games, rejected, positions = process_games("r", raws)
    assert rejected.num_rows == 0
    ucis = " ".join(games.column("moves_uci").to_pylist())
    assert "=" not in ucis and any(len(u) == 5 for u in ucis.split())  # promotions happened
    assert np.count_nonzero(positions.column("ep_square").is_valid().to_numpy(zero_copy_only=False)) > 0
    _check_against_python_chess(games, positions, 20_000)


@functools.cache
def _games_with_a_swapped_move() -> tuple[list[str], list[bool]]:
    """300 random games, each with one move swapped for another of the game, and whether
    python-chess reads each without an error: made once, for both implementations."""
    rng = random.Random(11)
    texts, truth = [], []
    for i in range(300):
        sans = _random_game(rng, 80)
        if len(sans) > 10:
            # Swap in a move from elsewhere in the game: sometimes still legal, mostly not.
            k = rng.randrange(1, len(sans))
            sans[k] = sans[rng.randrange(len(sans))]
        body = " ".join(sans)
        text = f'[Event "x{i}"]\n[Result "*"]\n\n{body} *\n'
        texts.append(text)
        truth.append(not chess.pgn.read_game(io.StringIO(text)).errors)
    return texts, truth


def test_illegal_moves_are_rejected_exactly_when_python_chess_rejects():
    texts, truth = _games_with_a_swapped_move()
    games, rejected, _ = process_games("x", [RawGame(i, t, True) for i, t in enumerate(texts)])
    kept = set(games.column("game_index").to_pylist())
    assert [i in kept for i in range(len(texts))] == truth
    assert 0 < len(kept) < len(texts)  # both outcomes are exercised


def _python_chess_facts(board: chess.Board) -> tuple:
    return (
        board.pawns,
        board.knights,
        board.bishops,
        board.rooks,
        board.queens,
        board.kings,
        board.occupied_co[chess.WHITE],
        board.castling_rights,
        64 if board.ep_square is None else board.ep_square,
        board.halfmove_clock,
        board.is_check(),
    )


HAND_CASES = {
    # name: (start FEN or None, SAN moves); python-chess says which are legal.
    "en passant": (None, ["e4", "Nf6", "e5", "d5", "exd6", "exd6"]),
    "en passant exposing the king on the rank": ("8/8/8/KPp4r/8/8/8/7k w - c6 0 2", ["bxc6"]),
    "en passant without a file letter is a push": (None, ["e4", "Nf6", "e5", "d5", "d6"]),
    "castling both ways": ("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", ["O-O", "O-O-O", "Rfe1", "Kb7"]),
    "castling written with zeros": ("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", ["0-0-0", "0-0"]),
    "castling through an attacked square": ("r3k2r/8/8/8/8/8/6b1/R3K2R w KQkq - 0 1", ["O-O"]),
    "castling queenside past an attacked b-file": ("r3k2r/8/8/8/8/8/1r6/R3K2R w KQk - 0 1", ["O-O-O"]),
    "castling out of check": ("r3k2r/8/8/8/8/8/4r3/R3K2R w KQkq - 0 1", ["O-O"]),
    "castling after the rook was captured": (
        "r3k2r/8/8/8/8/8/7b/R3K2R b KQkq - 0 1",
        ["Bg1", "Kd1", "Bh2", "Ke1", "Bg1", "O-O"],
    ),
    "castling after the rook moved and came back": (
        "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
        ["Rh2", "Kd8", "Rh1", "Ke8", "O-O"],
    ),
    "promotion with capture": ("1n5k/P7/8/8/8/8/8/7K w - - 0 1", ["axb8=N", "Kg8", "Nd7"]),
    "promotion without the equals sign": ("1n5k/P7/8/8/8/8/8/7K w - - 0 1", ["a8Q+"]),
    "lowercase promotion": ("1n5k/P7/8/8/8/8/8/7K w - - 0 1", ["a8=q"]),
    "promotion missing its piece": ("1n5k/P7/8/8/8/8/8/7K w - - 0 1", ["a8"]),
    "promotion to a king": ("1n5k/P7/8/8/8/8/8/7K w - - 0 1", ["a8=K"]),
    "promotion on a move that does not promote": (None, ["e4=Q"]),
    "black promotes": ("7k/8/8/8/8/8/p7/7K b - - 0 1", ["a1=R+", "Kg2"]),
    "the pinned knight cannot be the one": ("4k3/8/8/8/4r3/8/2N1N3/4K3 w - - 0 1", ["Nd4"]),
    "overspecified moves": ("4k3/8/8/8/4r3/8/2N1N3/4K3 w - - 0 1", ["Nc2d4", "Kd7", "Nd4-b5"]),
    "the pinned knight named": ("4k3/8/8/8/4r3/8/2N1N3/4K3 w - - 0 1", ["Ned4"]),
    "ambiguous knights": ("4k3/8/8/8/8/8/2N1N3/4K3 w - - 0 1", ["Nd4"]),
    "disambiguated by rank": ("4k3/8/8/8/R7/8/8/R3K3 w - - 0 1", ["R4a2", "Kd7", "R1a3"]),
    "long algebraic pawn moves": (None, ["e2e4", "e7-e5", "Ng1f3"]),
    "king steps two squares": (None, ["e4", "e5", "Nf3", "Nc6", "Bc4", "Nf6", "Kg1"]),
    "king walks into check": ("4k3/8/8/8/8/8/3r4/4K3 w - - 0 1", ["Kd1"]),
    "king captures a defended piece": ("4k3/8/8/8/8/3r4/3r4/4K3 w - - 0 1", ["Kxd2"]),
    "pawn push blocked": (None, ["e4", "e5", "e5"]),
    "double step through a piece": ("4k3/8/8/8/8/4n3/4P3/4K3 w - - 0 1", ["e4"]),
    "capture onto an empty square": (None, ["exd3"]),
    "fool's mate": (None, ["f3", "e5", "g4", "Qh4#"]),
    "capture of own piece": (None, ["Nxd2"]),
    "null move": (None, ["e4", "--"]),
    "piece drop": (None, ["e4", "N@f6"]),
    "a move after checkmate": (None, ["f3", "e5", "g4", "Qh4#", "e4"]),
}


@pytest.mark.parametrize("case", HAND_CASES)
def test_hand_cases_equal_python_chess(case):
    fen, sans = HAND_CASES[case]
    board = chess.Board(fen) if fen else chess.Board()
    expected = [_python_chess_facts(board)]
    ucis, captures, error_ply = [], [], None
    for ply, san in enumerate(sans):
        try:
            move = board.parse_san(san)
            if not move:
                raise ValueError("null move")
        except ValueError:
            error_ply = ply
            break
        ucis.append(move.uci())
        captures.append(board.is_capture(move))
        board.push(move)
        expected.append(_python_chess_facts(board))
    state = State.from_board(chess.Board(fen) if fen else chess.Board())
    if error_ply is not None:
        with pytest.raises(ReplayError) as e:
            replay(state, sans)
        assert e.value.ply == error_ply
        return
    records, our_ucis, our_captures = replay(state, sans)
    assert [tuple(int(v) for v in r[:10]) + (bool(r[10]),) for r in records] == expected
    assert (our_ucis, our_captures.tolist()) == (ucis, captures)
    assert state.to_board().fen() == board.fen()


@pytest.mark.parametrize("implementation", ["compiled"], indirect=True)
def test_compiled_loop_resolves_every_move_of_real_games(fics_2022, compiled):
    """On real FICS games python-chess is never needed: no move falls back."""
    moves = 0
    for raw in iter_raw_games(fics_2022):
        sans, _ = tokenize(split_game(raw.text)[1])
        stop, *_ = compiled.replay(State.from_board(chess.Board()).compiled_args(), sans, 0, True)
        assert stop == len(sans), (raw.index, sans[stop])
        moves += len(sans)
    assert moves > 160_000


# ---- Values that must not wrap (issue 13, item 12) ------------------------------------------


def _numbered(sans: list[str], fullmove: int = 1, white_first: bool = True) -> str:
    """SAN moves as PGN movetext with move numbers from `fullmove`."""
    out = []
    for j, san in enumerate(sans):
        white = (j % 2 == 0) == white_first
        if white:
            out.append(f"{fullmove}.")
        elif j == 0:
            out.append(f"{fullmove}...")
        out.append(san)
        if not white:
            fullmove += 1
    return " ".join(out)


def _ingest_text(tmp_path, text: str):
    import pyarrow.parquet as pq

    from pipeline.ingest.ingest import IngestConfig, ingest_archive
    from pipeline.store.store import Store

    path = tmp_path / "long.pgn"
    path.write_text(text)
    store = Store(tmp_path / "store").ensure()
    ingest_archive(store, "long", path, IngestConfig(workers=1))
    return [pq.read_table(store.partition_file(t, "long")) for t in ("games", "rejected_games", "positions")]


def test_a_game_longer_than_65536_plies_keeps_every_ply_and_clock(tmp_path):
    """Knights out and back, 70,000 plies: the replay applies no game-ending rule (nor does
    python-chess's push), so every ply is a position. Move numbers run past 10000."""
    n = 70_000
    sans = ["Nf3", "Nf6", "Ng1", "Ng8"] * (n // 4)
    games, rejected, positions = _ingest_text(tmp_path, f'[Event "long"]\n[Result "*"]\n\n{_numbered(sans)} *\n')
    assert rejected.num_rows == 0, rejected.to_pylist()
    assert games.column("ply_count").to_pylist() == [n]
    assert games.column("moves_uci").to_pylist()[0].split() == ["g1f3", "g8f6", "f3g1", "f6g8"] * (n // 4)
    ply = positions.column("ply").to_numpy()
    assert positions.num_rows == n + 1 and (ply == np.arange(n + 1)).all()
    # No pawn move and no capture: the halfmove clock is the ply; the fullmove number grows
    # every second ply. python-chess says the same at the plies around the 16-bit edges.
    assert (positions.column("halfmove_clock").to_numpy() == np.arange(n + 1)).all()
    assert (positions.column("fullmove_number").to_numpy() == 1 + np.arange(n + 1) // 2).all()
    board, keys = chess.Board(), positions.column("position_key").to_pylist()
    moves = [chess.Move.from_uci(u) for u in ("g1f3", "g8f6", "f3g1", "f6g8")]
    for k in range(n + 1):
        if k in (0, 1, 2, 3, 65_534, 65_535, 65_536, 65_537, n):
            assert (keys[k], board.halfmove_clock, board.fullmove_number) == (
                chess.polyglot.zobrist_hash(board),
                int(positions["halfmove_clock"][k].as_py()),
                int(positions["fullmove_number"][k].as_py()),
            ), k
        if k < n:
            board.push(moves[k % 4])


def test_fen_clocks_at_the_16_bit_edge_do_not_wrap(tmp_path):
    fen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 65535 65535"
    sans = ["Nf3", "Nf6", "Ng1", "Ng8", "Nc3"]
    text = f'[Event "edge"]\n[SetUp "1"]\n[FEN "{fen}"]\n[Result "*"]\n\n{_numbered(sans, 65535)} *\n'
    games, rejected, positions = _ingest_text(tmp_path, text)
    assert rejected.num_rows == 0, rejected.to_pylist()
    board, expected = chess.Board(fen), []
    for san in [None] + sans:
        if san:
            board.push_san(san)
        expected.append((board.halfmove_clock, board.fullmove_number))
    got = list(zip(positions.column("halfmove_clock").to_pylist(), positions.column("fullmove_number").to_pylist()))
    assert got == expected and expected[-1] == (65540, 65537)


def test_move_number_10000_is_a_move_number_not_a_null_move(tmp_path):
    """python-chess reads the "0000" in "10000." as a null move; the facts come from pushing
    the SAN moves one by one instead."""
    fen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 9999"
    sans = ["Nf3", "Nf6", "Ng1", "Ng8", "e4", "e5"]
    movetext = _numbered(sans, 9999)
    assert "10000. Ng1" in movetext and "10001. e4" in movetext
    text = f'[Event "numbers"]\n[SetUp "1"]\n[FEN "{fen}"]\n[Result "*"]\n\n{movetext} *\n'
    games, rejected, positions = _ingest_text(tmp_path, text)
    assert rejected.num_rows == 0, rejected.to_pylist()
    board = chess.Board(fen)
    ucis = [board.push_san(s).uci() for s in sans]
    assert games.column("moves_uci").to_pylist() == [" ".join(ucis)]
    assert positions.column("fullmove_number").to_pylist() == [9999, 9999, 10000, 10000, 10001, 10001, 10002]


def test_a_fen_clock_beyond_the_stored_range_is_a_bad_fen(tmp_path):
    fen = f"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 {2**31}"
    text = f'[Event "huge"]\n[SetUp "1"]\n[FEN "{fen}"]\n[Result "*"]\n\n1. e4 *\n'
    games, rejected, _ = _ingest_text(tmp_path, text)
    assert games.num_rows == 0
    [row] = rejected.to_pylist()
    assert row["reason_code"] == "bad_fen" and "fullmove number" in row["reason"], row
