"""The fast replay against python-chess: every position of real games, random games, illegal moves."""

import io
import random

import chess
import chess.pgn
import chess.polyglot
import numpy as np

from pipeline import encoding
from pipeline.archive import RawGame, iter_raw_games
from pipeline.games import process_games


def _expected_rows(board: chess.Board, moves: list[chess.Move]):
    """Per-position facts straight from python-chess."""
    rows = []
    for k in range(len(moves) + 1):
        planes = b"".join(board.pieces_mask(pt, c).to_bytes(8, "little") for c in (True, False) for pt in range(1, 7))
        rows.append((chess.polyglot.zobrist_hash(board), planes, "w" if board.turn else "b",
                     board.halfmove_clock, board.fullmove_number, board.is_check(), board.fen()))
        if k < len(moves):
            board.push(moves[k])
    return rows


def _check_against_python_chess(games, positions, n_min):
    pos = positions.to_pydict()
    i = 0
    for g in games.to_pylist():
        board = chess.Board(g["start_fen"]) if g["start_fen"] else chess.Board()
        moves = [chess.Move.from_uci(u) for u in g["moves_uci"].split()] if g["moves_uci"] else []
        for key, planes, stm, hm, fm, check, fen in _expected_rows(board, moves):
            assert pos["position_key"][i] == key
            assert pos["planes"][i] == planes
            assert (pos["side_to_move"][i], pos["halfmove_clock"][i], pos["fullmove_number"][i], pos["is_check"][i]) == (
                stm, hm, fm, check)
            rebuilt = encoding.fen_from_row(pos["planes"][i], stm, pos["castling"][i], pos["ep_square"][i], hm, fm)
            assert rebuilt == fen
            i += 1
    assert i == positions.num_rows >= n_min


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


def test_illegal_moves_are_rejected_exactly_when_python_chess_rejects():
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
    games, rejected, _ = process_games("x", [RawGame(i, t, True) for i, t in enumerate(texts)])
    kept = set(games.column("game_index").to_pylist())
    assert [i in kept for i in range(len(texts))] == truth
    assert 0 < len(kept) < len(texts)  # both outcomes are exercised
