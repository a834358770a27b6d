"""The `tapered` model kind (training.models.Tapered: Texel's tuning of the traditional tables,
scripts/quiet_study.py): it starts as the traditional evaluation, in White's view on raw boards
and as the win probability of the side to move on the rows the training loop reads."""

import random

import chess
import numpy as np
import pytest
import torch

from pipeline.play.search import TRADITIONAL_TABLES, MaterialEvaluator, board_arrays
from training.encoders import Batch, get_encoder
from training.models import ModelSpec, build_model


def _boards(n: int = 300) -> list[chess.Board]:
    rng, boards, board = random.Random(7), [], chess.Board()
    while len(boards) < n:
        if board.is_game_over():
            board = chess.Board()
        board.push(rng.choice(list(board.legal_moves)))
        boards.append(board.copy(stack=False))
    return boards


def test_the_fit_starts_from_the_traditional_evaluation_in_whites_view():
    boards = _boards()
    planes, white, _ = board_arrays(boards)
    bits = torch.from_numpy(np.unpackbits(planes, axis=1, bitorder="little")).float()
    model = build_model(ModelSpec("tapered"), (12, 8, 8), 1)
    with torch.no_grad():
        fitted = model.centipawns(bits).numpy()
    side_to_move = MaterialEvaluator().evaluate(boards)
    assert np.allclose(fitted, np.where(white, side_to_move, -side_to_move), atol=1e-3)
    # Black's tables are White's mirrored and negated, as the traditional ones are written.
    for table, traditional in zip((model.middle, model.end), TRADITIONAL_TABLES, strict=True):
        assert np.array_equal(table.detach().numpy(), traditional)


def test_on_side_to_move_rows_it_gives_the_side_to_moves_win_probability():
    """Rows as sabatelli_regression stores them (Black-to-move rows `mirrored`) through bitmap768:
    the traditional evaluation of the side to move, as a win probability at 400 cp a factor of 10;
    a tempo moves every row's centipawns by the same amount, whichever side is to move."""
    boards = _boards()
    planes, white, castling = board_arrays(boards)
    batch = Batch(*map(torch.from_numpy, (planes, white, castling, ~white)))
    model = build_model(ModelSpec("tapered"), (12, 8, 8), 1)
    side_to_move = MaterialEvaluator().evaluate(boards)
    with torch.no_grad():
        assert np.allclose(model(get_encoder("bitmap768")(batch)).squeeze(1).numpy(),
                           1 / (1 + 10 ** (-side_to_move / 400)), atol=1e-5)  # fmt: skip
        model.tempo.fill_(30.0)
        with_tempo = model(get_encoder("bitmap768")(batch)).squeeze(1).numpy()
    assert np.allclose(with_tempo, 1 / (1 + 10 ** (-(side_to_move + 30) / 400)), atol=1e-5)


def test_it_reads_768_piece_bits_into_one_value():
    with pytest.raises(ValueError, match="tapered reads 768 piece bits"):
        build_model(ModelSpec("tapered"), (12,), 1)
    with pytest.raises(ValueError, match="tapered reads 768 piece bits"):
        build_model(ModelSpec("tapered"), (12, 8, 8), 3)
