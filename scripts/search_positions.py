"""Issue 19's study: more positions for the regression target, of the kind a search scores.

A search scores the children of every node it visits, most of them after moves no player would
make; a dataset of game positions shows a network none of them, and a small network overfits
its few thousand games (train error half the validation error). Stockfish's static evaluation,
the target of a `sabatelli_regression` dataset built with `--label-static`, costs well under a
millisecond a position, so the positions a search meets can be labelled in bulk.

For every train position of such a dataset this script plays `--children` of its legal moves,
chosen at random (seeded by the seed and the row). It keeps each child that is:
- not over and not in check (`eval` scores no position in check);
- not a position of any split (the leakage guard's rule for val and test; a train position
  has its row already);
- met for the first time.

Each is labelled by Stockfish's `eval` (pipeline.stockfish_eval, one engine a worker) from a FEN
with halfmove clock 0, as `chess-pipeline label` labels every position (Stockfish scales its
evaluation down as the fifty-move count grows). Its target is the dataset's: the linear map of
the centipawns, clipped at `clip_cp`, from the side to move's view or White's as the dataset's
`pov` says.

It writes OUT/datasets/sabatelli_regression/: train.parquet holds the train rows and then the
new ones (the position's key and columns, the label's, both targets and `mirrored` as the
dataset sets them; the game's columns null); val.parquet and test.parquet are copied
unchanged. So a model trained on it is measured on the same held-out positions as one trained
on the dataset alone:

    python scripts/search_positions.py --data STORE/datasets/sabatelli_regression --out MORE
    python -m training.train --store MORE --dataset sabatelli_regression --model mlp_material --hidden 256 32

Prints the engine, the counts, the labelling rate and the new rows' target distribution beside
the train rows'. Add `--debug` for tracebacks.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import chess  # noqa: E402
import chess.polyglot  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from pipeline.encoding import fens_from_columns, zobrist  # noqa: E402
from pipeline.engine import UciEngine, find_stockfish  # noqa: E402
from pipeline.parallel import ordered_map, task_seed  # noqa: E402
from pipeline.search import board_arrays  # noqa: E402

DATASET = "sabatelli_regression"
CHUNK = 2048
"""Children a worker labels in one task."""


def fail(message: str) -> None:
    raise SystemExit(f"search_positions: {message}")


def dataset_params(path: Path) -> dict:
    """The dataset's build parameters (the schema's chess_pipeline.dataset metadata)."""
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(b"chess_pipeline.dataset")
    if raw is None:
        fail(f"{path} has no chess_pipeline.dataset metadata: build it with `chess-pipeline datasets {DATASET}`")
    info = json.loads(raw)
    if info.get("dataset") != DATASET:
        fail(f"{path} is a {info.get('dataset')} dataset, not {DATASET}")
    params = info.get("params") or {}
    if params.get("target_kind", "linear") != "linear" or params.get("label_kind") != "static":
        fail(f"{path}: this study needs the linear target on static labels (`datasets {DATASET} --label-static`)")
    return params


def position_keys(path: Path) -> set[int]:
    """The split's positions: their polyglot keys, the store's position identity (the leakage
    guard's too)."""
    return set(pq.read_table(path, columns=["position_key"]).column("position_key").to_pylist())


def children(fens: list[str], count: int, seed: int, held_out: set[int]) -> list[chess.Board]:
    """`count` random children of each position (fewer where it has fewer moves), those not
    over, not in check and not held out; each position once, its clocks 0 and 1."""
    out, seen = [], set()
    for row, fen in enumerate(fens):
        board = chess.Board(fen)
        moves = list(board.legal_moves)
        for move in random.Random(task_seed(seed, row)).sample(moves, min(count, len(moves))):
            board.push(move)
            if not board.is_check() and not board.is_game_over(claim_draw=False):
                key = chess.polyglot.zobrist_hash(board)  # = position_key (pipeline.encoding.zobrist)
                if key not in seen and key not in held_out:
                    seen.add(key)
                    child = board.copy(stack=False)
                    child.halfmove_clock, child.fullmove_number = 0, 1  # as `label` asks (module docstring)
                    out.append(child)
            board.pop()
    return out


def _ep(board: chess.Board) -> int | None:
    """The store's en passant square: only where a pawn of the side to move could take there."""
    return board.ep_square if board.has_pseudo_legal_en_passant() else None


def _engine(binary: str | None):
    from pipeline.stockfish_eval import StockfishStaticEvaluator

    return StockfishStaticEvaluator(binary)


def _label(fens: list[str], evaluator) -> list[float]:
    return evaluator.evaluate([chess.Board(f) for f in fens]).tolist()


def rows_of(boards: list[chess.Board], cp: np.ndarray, params: dict, template: pa.Schema) -> pa.Table:
    """The new rows in the train file's schema: the position (its key, planes, side to move,
    castling, en passant, clocks), the label (White's centipawns, the row's score, both targets)
    and the `mirrored` flag; the game's columns null. `cp`: the side to move's centipawns; the
    score and targets take the dataset's `pov`."""
    planes, white, castling = board_arrays(boards)
    n = len(boards)
    stm = np.where(white, "w", "b")
    clip_cp = float(params.get("clip_cp", 1500))
    mirrored = ~white if params.get("pov", "side_to_move") == "side_to_move" else np.zeros(n, dtype=bool)
    white_cp = np.round(np.where(white, cp, -cp))  # whole centipawns, as `label` stores them
    cp = np.where(mirrored, -white_cp, white_cp)  # the row's view
    target = (np.clip(cp, -clip_cp, clip_cp) + clip_cp) / (2.0 * clip_cp)
    ep = [_ep(b) for b in boards]
    values = {
        "dataset": pa.array([DATASET] * n),
        "planes": pa.array([p.tobytes() for p in planes], type=pa.binary(96)),
        "side_to_move": pa.array(stm.tolist()),
        "castling": pa.array(castling, type=pa.uint8()),
        "position_key": pa.array(zobrist(planes, castling, np.array([-1 if e is None else e for e in ep]), white)),
        "ep_square": pa.array(ep, type=pa.int8()),
        "halfmove_clock": pa.array([b.halfmove_clock for b in boards], type=pa.uint32()),
        "fullmove_number": pa.array([b.fullmove_number for b in boards], type=pa.uint32()),
        "cp_white": pa.array(white_cp.astype(np.int32)),
        "score_white": pa.array(white_cp.astype(np.int32)),
        "score": pa.array(cp.astype(np.int32)),
        "win_prob": pa.array(1.0 / (1.0 + 10.0 ** (-cp / float(params.get("wp_scale", 400.0))))),
        "mirrored": pa.array(mirrored),
        "linear": pa.array(target),
        "target": pa.array(target),
        "split": pa.array(["train"] * n),
    }
    columns = [values[f.name].cast(f.type) if f.name in values else pa.nulls(n, f.type) for f in template]
    return pa.Table.from_arrays(columns, schema=template)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help=f"a {DATASET} dataset folder (train/val/test.parquet)")
    ap.add_argument("--out", required=True, help="a new store folder for the larger dataset")
    ap.add_argument("--children", type=int, default=2, help="random children of each train position")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0, help="engine processes (0: one per usable core)")
    ap.add_argument("--max-rows", type=int, default=0, help="only the first N train rows' children (0: all)")
    ap.add_argument("--stockfish", default=None, help="the engine binary (default: found as the pipeline finds it)")
    ap.add_argument("--debug", action="store_true", help="tracebacks instead of one line")
    args = ap.parse_args(argv)
    try:
        run(args)
    except KeyboardInterrupt:
        fail(f"interrupted: {args.out} was not written")
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as e:  # the engine's: RuntimeErrors
        if args.debug:
            raise
        fail(f"{type(e).__name__}: {e}")


def run(args: argparse.Namespace) -> None:
    if args.children < 1:
        fail(f"--children is at least 1, got {args.children}")
    data, out = Path(args.data), Path(args.out) / "datasets" / DATASET
    splits = {s: data / f"{s}.parquet" for s in ("train", "val", "test")}
    missing = [str(p) for p in splits.values() if not p.exists()]
    if missing:
        fail(f"no {', '.join(missing)}: point --data at a {DATASET} dataset folder")
    if out.exists():
        fail(f"{out} exists: give --out a new folder")
    params = dataset_params(splits["train"])
    start = time.monotonic()
    train = pq.read_table(splits["train"])
    held_out = position_keys(splits["val"]) | position_keys(splits["test"])
    held_out |= position_keys(splits["train"])  # a child that is a train position already has its row
    source = train.slice(0, args.max_rows) if args.max_rows else train
    cols = source.select(["planes", "side_to_move", "castling", "ep_square"]).to_pydict()
    fens = fens_from_columns(cols["planes"], cols["side_to_move"], cols["castling"], cols["ep_square"])
    boards = children(fens, args.children, args.seed, held_out)
    print(f"{len(boards):,} new positions from {len(fens):,} train positions ({time.monotonic() - start:.0f} s)")
    engine = UciEngine(find_stockfish(args.stockfish)).start()
    print(f"labelling with {engine.name} ({engine.path}), as the dataset's labels should be")
    engine.close()
    t0 = time.monotonic()
    tasks = [[b.fen() for b in boards[i : i + CHUNK]] for i in range(0, len(boards), CHUNK)]

    def progress(done: int, total: int) -> None:
        rate = min(done * CHUNK, len(boards)) / max(time.monotonic() - t0, 1e-9)
        print(f"\rlabelled {min(done * CHUNK, len(boards)):,} of {len(boards):,} ({rate:,.0f}/s)", end="", flush=True)

    labels = ordered_map(_label, tasks, args.workers, _engine, (args.stockfish,), progress=progress)
    cp = np.array([x for part in labels for x in part], dtype=np.float64)
    print(f"\nStockfish's eval: {len(cp):,} positions in {time.monotonic() - t0:.0f} s")
    new = rows_of(boards, cp, params, train.schema)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{DATASET}.", dir=out.parent))  # this run's own; renamed when whole
    tmp.chmod(0o755)  # as a folder the pipeline makes, not mkdtemp's 0700
    with pq.ParquetWriter(tmp / "train.parquet", train.schema) as w:
        w.write_table(train, row_group_size=16_384)
        w.write_table(new, row_group_size=16_384)
    for s in ("val", "test"):
        shutil.copyfile(splits[s], tmp / f"{s}.parquet")
    if out.exists():
        shutil.rmtree(tmp)
        fail(f"{out} appeared while this run labelled: nothing written; give --out a new folder")
    tmp.rename(out)  # whole or not at all
    if not len(new):
        print(f"{out}: no new position (train {len(train):,} rows as they were)")
        return
    old, added = train.column("target").to_numpy(), new.column("target").to_numpy()
    print(
        f"{out}: train {len(train):,} + {len(new):,} rows; target mean / std: dataset {old.mean():.3f} / "
        f"{old.std():.3f}, new {added.mean():.3f} / {added.std():.3f} "
        f"(at the clip: {np.mean((added <= 0) | (added >= 1)):.1%} new, {np.mean((old <= 0) | (old >= 1)):.1%} dataset)"
    )


if __name__ == "__main__":
    main()
