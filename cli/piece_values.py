"""`chess-pipeline piece-values FEN [--model NAME]`: every piece's value on a board, from a trained
piece-value network (training.piece_values.piece_values).

The model follows lineage: the checkpoint its model asset's latest materialisation recorded in
the store's Dagster instance, never the newest file in a folder."""

import argparse
import math

import dagster as dg

from cli.runtime import open_instance, open_store
from pipeline.store.storage_paths import StorePath

DEFAULT_MODEL = "piece_value_net"


def model_checkpoint(instance: dg.DagsterInstance, model: str) -> StorePath:
    """The checkpoint of the model asset's latest materialisation (a file, or an object of an S3
    store), or SystemExit saying what to run."""
    from pipeline.store import storage
    from training.checkpoints import store_location  # torch: imported when the command runs

    event = instance.get_latest_materialization_event(dg.AssetKey(model))
    mat = event.asset_materialization if event is not None else None
    if mat is None or "checkpoint" not in mat.metadata:
        raise SystemExit(
            f"chess-pipeline piece-values: {model} is not trained yet (run `chess-pipeline train {model}`)"
        )
    path = store_location(str(mat.metadata["checkpoint"].value))  # an S3 store's: s3://bucket/key
    if not storage.exists(path):
        raise SystemExit(
            f"chess-pipeline piece-values: {path}, the checkpoint of {model}'s latest training, is gone "
            f"(run `chess-pipeline train {model}` again)"
        )
    return path


def piece_lines(board, values: dict[str, float], output: str) -> list[str]:
    """One line per piece (square, piece, colour, value), then White's sum minus Black's."""
    import chess

    lines, total = [], 0.0
    for name, value in values.items():
        piece = board.piece_at(chess.parse_square(name))
        colour = "white" if piece.color == chess.WHITE else "black"
        total += value if piece.color == chess.WHITE else -value
        lines.append(f"{name}  {piece.symbol()}  {colour:5}  {value:+.2f}")
    if output == "sigmoid":
        lines.append(
            f"White's values - Black's: {total:+.2f}; expected result for White {1 / (1 + math.exp(-total)):.3f}"
        )
    else:
        lines.append(f"White's values - Black's: {total:+.2f} pawns (the model's score, White's view)")
    return lines


def cmd_piece_values(args: argparse.Namespace) -> None:
    from training.catalog import PIECE_VALUE_MODELS
    from training.piece_values import load_piece_value_net, piece_values, read_board

    if args.model not in PIECE_VALUE_MODELS:
        raise SystemExit(
            f"chess-pipeline piece-values: --model must be one of {', '.join(PIECE_VALUE_MODELS)}; got {args.model!r}"
        )
    board = read_board(args.fen)  # a bad FEN: one line before any store or model is opened
    store = open_store(args.home)
    model = load_piece_value_net(model_checkpoint(open_instance(store), args.model))
    values = piece_values(board.fen(), model)
    unit = "pawns" if model.output == "linear" else "logits of the expected result"
    print(f"{args.model}: each piece's value to its owner ({unit})")
    print("\n".join(piece_lines(board, values, model.output)))


def add_parser(sub) -> None:
    s = sub.add_parser("piece-values", help="the value of every piece on a board (FEN), from a piece-value network")
    s.add_argument(
        "fen", metavar="FEN", help='a position, e.g. "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"'
    )
    s.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"the piece-value model asset: piece_value_net or piece_value_net_result (default {DEFAULT_MODEL})",
    )
    s.set_defaults(func=cmd_piece_values)
