"""training.evaluator.SparseMLP without a trained checkpoint: an untrained MLP with random batch
norm statistics, through numpy and through torch on the same boards, and the models it leaves
to torch."""

import dataclasses
import random

import chess
import numpy as np
import pytest
import torch

from pipeline.play.search import board_arrays, board_bits
from training.encoders import Batch, get_encoder
from training.evaluator import SparseMLP
from training.models import PRESETS, build_model


def _boards(n: int, seed: int) -> list[chess.Board]:
    rng, out, b = random.Random(seed), [], chess.Board()
    while len(out) < n:
        if b.is_game_over():
            b = chess.Board()
        b.push(rng.choice(list(b.legal_moves)))
        out.append(b.copy(stack=False))
    return out


def _model(preset: str, hidden: tuple[int, ...], outputs: int) -> torch.nn.Module:
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(PRESETS[preset], hidden=hidden), (12, 8, 8), outputs)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm1d):  # statistics far from the identity, so a wrong fold shows
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            m.weight.data.uniform_(0.5, 2)
            m.bias.data.uniform_(-1, 1)
    return model.eval()


@pytest.mark.parametrize("preset,outputs", [("mlp3", 3), ("mlp_regression", 1), ("mlp_material", 1)])
def test_numpy_gives_the_torch_models_outputs(preset, outputs):
    model = _model(preset, (48, 16), outputs)
    sparse = SparseMLP.of(model, "bitmap768")
    assert sparse is not None
    boards = _boards(200, seed=3)
    planes, white, castling = board_arrays(boards)
    mirrored = ~white  # Black to move mirrored, as for a side-to-move model
    with torch.no_grad():
        batch = Batch(*(torch.from_numpy(a) for a in (planes, white, castling, mirrored)))
        expected = model(get_encoder("bitmap768")(batch)).numpy()
    assert np.ptp(expected) > 0.01  # outputs that differ by board, so a mix-up of rows shows
    bits = board_bits(boards)  # what the evaluator gives it; torch above reads the store's encoding
    np.testing.assert_allclose(sparse(bits, mirrored), expected, rtol=1e-4, atol=1e-5)
    one = np.concatenate([sparse(bits[i : i + 1], mirrored[i : i + 1]) for i in range(len(boards))])
    np.testing.assert_allclose(one, expected, rtol=1e-4, atol=1e-5)


def test_what_it_cannot_run_is_left_to_torch():
    assert SparseMLP.of(_model("mlp3", (16,), 3), "features") is None  # another encoder
    assert SparseMLP.of(build_model(PRESETS["cnn"], (12, 8, 8), 3), "bitmap768") is None
    no_bias = _model("mlp3", (16,), 3)
    no_bias.net[1] = torch.nn.Linear(768, 16, bias=False)
    assert SparseMLP.of(no_bias, "bitmap768") is None
    for bn in (torch.nn.BatchNorm1d(16, affine=False), torch.nn.BatchNorm1d(16, track_running_stats=False)):
        model = _model("mlp_regression", (16,), 1)
        model.net[2] = bn
        assert SparseMLP.of(model, "bitmap768") is None
    other_alpha = _model("mlp_regression", (16,), 1)
    other_alpha.net[3] = torch.nn.ELU(alpha=0.5)
    assert SparseMLP.of(other_alpha, "bitmap768") is None


def test_elu_of_large_inputs_does_not_overflow():
    with np.errstate(over="raise"):
        assert SparseMLP.ACTIVATIONS["ELU"](np.array([1000.0, -1000.0, 0.5])).tolist() == [1000.0, -1.0, 0.5]
