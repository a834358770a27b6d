"""Team 44's piece-value network: the 837 per-piece inputs against python-chess, the model's
output as the signed sum of its piece values, and a quick training run on a real labelled store
against the book-material baseline."""

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from pipeline.datasets.datasets import SplitConfig, build_dataset, dataset_dir
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
from training.autoencoder import PretrainConfig
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import PRESETS, build_model
from training.piece_values import (
    BOOK_VALUES,
    PieceValueNet,
    boards_batch,
    evaluate_piece_values,
    load_piece_value_net,
    piece_rows,
    piece_values,
    read_board,
)
from training.train import TrainConfig, train

# Morphy v the Duke of Brunswick and Count Isouard, Paris 1858: both sides to move, castling
# rights kept, lost and used (O-O-O), captures of every kind.
OPERA = (
    "e4 e5 Nf3 d6 d4 Bg4 dxe5 Bxf3 Qxf3 dxe5 Bc4 Nf6 Qb3 Qe7 Nc3 c6 Bg5 b5 Nxb5 cxb5 Bxb5+ Nbd7 "
    "O-O-O Rd8 Rxd7 Rxd7 Rd1 Qe6 Bxd7+ Nxd7 Qb8+ Nxb8 Rd8#"
)


def opera_boards() -> list[chess.Board]:
    board, out = chess.Board(), [chess.Board()]
    for san in OPERA.split():
        board.push_san(san)
        out.append(board.copy())
    return out


def expected_row(board: chess.Board, square: int) -> np.ndarray:
    """The 837 inputs of the piece on `square`, from python-chess alone: the board as its owner
    sees it (Black's pieces: board.mirror(), colours swapped and ranks flipped), the side to
    move, castling rights K Q k q, and the piece's square (mirrored for Black)."""
    white = board.piece_at(square).color == chess.WHITE
    view = board if white else board.mirror()
    bits = np.zeros(837, dtype=np.float32)
    for s, p in view.piece_map().items():
        bits[(p.piece_type - 1 + (0 if p.color == chess.WHITE else 6)) * 64 + s] = 1
    bits[768] = view.turn == chess.WHITE
    bits[769:773] = [
        view.has_kingside_castling_rights(chess.WHITE),
        view.has_queenside_castling_rights(chess.WHITE),
        view.has_kingside_castling_rights(chess.BLACK),
        view.has_queenside_castling_rights(chess.BLACK),
    ]
    bits[773 + (square if white else chess.square_mirror(square))] = 1
    return bits


def test_837_inputs_of_every_piece_match_python_chess_on_a_real_game():
    boards = opera_boards()
    rows = get_encoder("pieces837")(boards_batch(boards))
    dense = rows.dense().numpy()
    assert dense.shape == (sum(len(b.piece_map()) for b in boards), 837)
    seen = set()
    for i in range(dense.shape[0]):
        board, square = boards[int(rows.position[i])], int(rows.board_square[i])
        piece = board.piece_at(square)
        assert piece is not None
        assert int(rows.piece_type[i]) == piece.piece_type - 1
        assert float(rows.sign[i]) == (1.0 if piece.color == chess.WHITE else -1.0)
        np.testing.assert_array_equal(dense[i], expected_row(board, square), err_msg=f"{board.fen()} {square}")
        seen.add((int(rows.position[i]), square))
    assert seen == {(i, s) for i, b in enumerate(boards) for s in b.piece_map()}  # every piece, once
    # Both sides to move, and castling rights all kept, partly lost and given up by castling.
    assert {b.turn for b in boards} == {True, False}
    assert len({b.castling_rights for b in boards}) >= 3


def test_the_split_first_layer_is_the_837_input_linear_layer():
    torch.manual_seed(0)
    model = build_model(PRESETS["piece_value_cp"], (837,), 1)
    rows = piece_rows(boards_batch(opera_boards()))
    assert torch.allclose(model.codes(rows), model.encoder(rows.dense()), atol=1e-5)


@pytest.mark.parametrize("preset", ["piece_value_cp", "piece_value_result"])
def test_the_output_is_white_values_minus_black_values(preset):
    torch.manual_seed(1)
    model = build_model(PRESETS[preset], (837,), 1).eval()
    boards = opera_boards()
    rows = piece_rows(boards_batch(boards))
    with torch.no_grad():
        out = model(rows)
    assert out.shape == (len(boards), 1) and model.values(rows).shape == (rows.square.shape[0],)
    for i, board in list(enumerate(boards))[::6]:
        values = piece_values(board.fen(), model)
        assert set(values) == {chess.square_name(s) for s in board.piece_map()}
        total = sum(
            v if board.piece_at(chess.parse_square(sq)).color == chess.WHITE else -v for sq, v in values.items()
        )
        expected = total if preset == "piece_value_cp" else 1 / (1 + np.exp(-total))
        assert out[i, 0].item() == pytest.approx(expected, abs=1e-4)


def test_colours_swapped_the_score_is_negated_and_each_piece_keeps_its_value():
    """Every piece is valued from its owner's side: the mirrored position (python-chess's
    board.mirror()) gives each mirrored piece the same value and the negated score."""
    torch.manual_seed(2)
    model = build_model(PRESETS["piece_value_cp"], (837,), 1).eval()
    for board in opera_boards()[::5]:
        a, b = piece_values(board.fen(), model), piece_values(board.mirror().fen(), model)
        for sq, v in a.items():
            assert b[chess.square_name(chess.square_mirror(chess.parse_square(sq)))] == pytest.approx(v, abs=1e-5)


def test_a_bad_fen_or_an_illegal_position_is_refused_saying_why():
    with pytest.raises(ValueError, match="not a valid FEN"):
        read_board("rnbqkbnr/pppppppp/8/8 w")
    with pytest.raises(ValueError, match="not a legal position .*no black king"):
        read_board("8/8/8/8/8/8/8/4K3 w - - 0 1")


def test_pretraining_trains_the_autoencoder_and_leaves_it_fixed():
    torch.manual_seed(3)
    model = build_model(PRESETS["piece_value_cp"], (837,), 1)
    boards = opera_boards()[::8]
    before = [p.detach().clone() for p in model.encoder.parameters()]

    def inputs(epoch):  # what the training loop's hook hands over: encoded batches (PieceRows)
        for i in range(0, len(boards), 2):
            yield piece_rows(boards_batch(boards[i : i + 2]))

    history = model.pretrain(inputs, inputs, PretrainConfig(epochs=1, lr=1e-3), torch.device("cpu"), lambda s: None)
    assert [h["layer"] for h in history] == [0, 1, 2, 3] and all(h["val_loss"] is not None for h in history)
    assert all(not torch.equal(a, b) for a, b in zip(before, model.encoder.parameters()))
    assert not any(p.requires_grad for p in model.encoder.parameters())  # the valuators learn from fixed codes
    assert all(p.requires_grad for p in model.valuators.parameters())


def test_the_loader_delivers_another_target_column_and_leaves_out_its_nulls(tmp_path):
    path = tmp_path / "train.parquet"
    pq.write_table(
        pa.table(
            {
                "planes": pa.array([bytes([i]) * 96 for i in range(6)], pa.binary(96)),
                "side_to_move": ["w"] * 6,
                "castling": pa.array([0] * 6, pa.uint8()),
                "target": pa.array([0.0, 1, 2, 3, 4, 5]),
                "result_score": pa.array([1.0, None, 0.5, None, 0.0, 1.0]),
            }
        ),
        path,
    )
    got = [b for b in ParquetBatches(path, LoaderConfig(batch_size=4, shuffle=False), target="result_score").epoch(0)]
    assert [v for b in got for v in b.target.tolist()] == [1.0, 0.5, 0.0, 1.0]
    with pytest.raises(ValueError, match="has no column 'winner' to learn; its columns: castling, planes"):
        ParquetBatches(path, target="winner")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, stockfish, fics_2022):
    """80 real FICS games, every position labelled with Stockfish's static evaluation (fast),
    the piece_values set split 60/20/20 by game, and a quick piece_value_net run on it."""
    tmp = tmp_path_factory.mktemp("piece_values")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 80, tmp / "src.pgn"))
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun(limit=Limit("static")))
    split = SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2)
    stats = build_dataset(store, "piece_values", {"label_kind": "static"}, split)
    assert all(n > 500 for n in stats.rows.values()), stats.rows
    cfg = TrainConfig(
        store=str(store.root),
        dataset="piece_values",
        model="piece_value_cp",
        encoder="pieces837",
        epochs=1,
        pretrain_epochs=0,
        batch_size=64,
        max_train_rows=64 * 60,
        max_eval_rows=500,
        threads=1,
        out=str(tmp / "run"),
    )
    result = train(cfg, log=lambda s: None)
    return store, result


@pytest.fixture(scope="module")
def report(trained):
    """The trained model on (the first 1,000 rows of) its test split, shared by the tests below."""
    store, result = trained
    folder = dataset_dir(store, "piece_values")
    model = load_piece_value_net(result.checkpoint)
    return evaluate_piece_values(model, folder / "test.parquet", folder / "train.parquet", max_rows=1000)


def test_a_quick_run_beats_book_material_with_a_fitted_scale_on_held_back_games(trained, report):
    store, _ = trained
    folder = dataset_dir(store, "piece_values")
    assert report.rows == min(1000, pq.read_metadata(folder / "test.parquet").num_rows)
    assert report.mse < report.baseline_mse, (report.mse, report.baseline_mse)
    # The baseline really is book material: its fitted scale turns it into Stockfish's pawns.
    assert 0.3 < report.baseline_fit[0] < 2.0
    # Values per piece type and per phase, pawn = 1, for every type the test games have.
    assert report.relative["pawn"] == 1.0 and set(report.relative) >= {"knight", "bishop", "rook", "queen"}
    assert sum(report.counts["positions"].values()) == report.rows
    assert len(BOOK_VALUES) == 5


def test_moving_a_piece_changes_the_values_on_a_trained_model(trained):
    model = load_piece_value_net(trained[1].checkpoint)
    assert isinstance(model, PieceValueNet)
    before = piece_values("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 2 3", model)
    after = piece_values("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 3 3", model)  # Ng1-f3
    assert "g1" in before and "g1" not in after and "f3" in after
    assert after["f3"] != pytest.approx(before["g1"], abs=1e-6)
    # The knight's move changes what the pieces around it are worth too (their context).
    unchanged = [sq for sq in before if sq != "g1" and sq in after and after[sq] == pytest.approx(before[sq], abs=1e-6)]
    assert len(unchanged) < len(after) - 1


def test_both_variants_score_boards_for_search_in_centipawn_units(trained, tmp_path):
    """The evaluator (training/evaluator.py) turns the centipawn model's output (pawns, White's
    view) into centipawns for the side to move, and the result variant's expected result p
    into 1000 x (2p - 1), the 3-class models' scale."""
    from training.evaluator import NetworkEvaluator

    store, result = trained
    boards = [
        chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"),
        chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R b KQkq - 2 3"),
    ]
    result_run = train(
        TrainConfig(
            store=str(store.root),
            dataset="piece_values",
            model="piece_value_result",
            encoder="pieces837",
            target="result_score",
            epochs=1,
            pretrain_epochs=0,
            batch_size=64,
            max_train_rows=128,
            max_eval_rows=64,
            threads=2,
            out=str(tmp_path / "result"),
        ),
        log=lambda s: None,
    )
    assert "cp_mae" not in result_run.test and result_run.test["rows"] == 64  # a result is no centipawns
    for checkpoint, to_score in (
        (result.checkpoint, lambda out: 100 * out),
        (result_run.checkpoint, lambda p: 1000 * (2 * p - 1)),
    ):
        model = load_piece_value_net(checkpoint)
        with torch.no_grad():
            out = model(piece_rows(boards_batch(boards)))[:, 0].numpy()
        white_view = to_score(out)
        scores = NetworkEvaluator(checkpoint).evaluate(boards)
        assert scores == pytest.approx([white_view[0], -white_view[1]], abs=1e-3)


def test_values_by_phase_share_one_unit_and_the_labels_linear_fit_is_beside_them(trained, report):
    """Each phase's values are in the overall pawn unit, so the phases average back to the
    overall values (with a phase's own pawn as the unit they do not, and a phase where the pawn
    is barely pinned down, most openings, blew up: an opening queen of 82 pawns); and the linear
    fit of train's labels on the piece-count differences, counted here with python-chess."""
    from pipeline.ingest.encoding import fen_from_row

    folder = dataset_dir(trained[0], "piece_values")
    for t, overall in report.relative.items():
        n = {p: report.counts[p][t] for p in report.by_phase if t in report.by_phase[p]}
        mean = sum(report.by_phase[p][t] * k for p, k in n.items()) / sum(n.values())
        assert mean == pytest.approx(overall, rel=1e-6), t
    assert report.split == {"seed": 0, "val_fraction": 0.2, "test_fraction": 0.2, "by": "game", "guard": True}
    cols = ["planes", "side_to_move", "castling", "ep_square", "halfmove_clock", "fullmove_number", "target"]
    train_rows = pq.read_table(folder / "train.parquet", columns=cols).to_pylist()
    x, y = [], []
    for r in train_rows:
        board = chess.Board(fen_from_row(*(r[c] for c in cols[:-1])))
        x.append(
            [len(board.pieces(p, chess.WHITE)) - len(board.pieces(p, chess.BLACK)) for p in chess.PIECE_TYPES[:5]] + [1]
        )
        y.append(r["target"])
    weights = np.linalg.lstsq(np.array(x, dtype=float), np.array(y), rcond=None)[0]
    assert [report.linear_fit[t] for t in ("pawn", "knight", "bishop", "rook", "queen")] == pytest.approx(
        weights[:5], abs=1e-6
    )
    assert report.linear_fit["queen"] > 4 * report.linear_fit["pawn"] > 0  # to Stockfish a queen is many pawns
    assert ("piece_values", "linear_fit_value_queen") in {r[:2] for r in report.result_rows()}


def test_each_value_has_a_95_interval_from_whole_test_games_holding_it(report):
    """Issue 37: a seeded bootstrap of the test split's games (training.piece_values.value_intervals)."""
    assert report.interval_games > 1
    assert report.intervals["pawn"] == (1.0, 1.0)  # the unit: every draw divides by its own pawn
    for t, v in report.relative.items():
        low, high = report.intervals[t]
        assert low <= v <= high, (t, low, v, high)
