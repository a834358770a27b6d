"""Issue 19's study: what the labels of positions that are not quiet teach an evaluation.

The traditional evaluation (pipeline.play.search.MaterialEvaluator: material and Michniewski's
piece-square tables, tapered by phase) is a linear function of the 768 piece bits. This script
fits the same function to Stockfish's labels (Texel's tuning: the win probability of the
label, 1 / (1 + 10^(-cp / 400)), by mean squared error, starting from Michniewski's tables), once
on every train position of a `sabatelli_regression` dataset and once on its quiet positions
only (the side to move not in check and without a capture), and reports for each: the test
error beside the traditional evaluation's, the pieces' average values, and a match against the
traditional evaluation in the same search (pipeline.play.search.AlphaBeta at a fixed depth, with
`--quiescence` plies of captures beyond it, each of Sabatelli's openings twice, colours
swapped). The learnt tables play through MaterialEvaluator itself, so both sides search at the
same cost.

The fit runs in the training loop (training.train.train, a `tapered` ModelSpec passed as its
`preset`: training.models.Tapered, Adam on the win probability's squared error (`--lr` in
centipawns), every epoch run and the one with the lowest validation error kept), on the
dataset's rows as the loop reads them: each as if White were to move, so Black's tables being
White's mirrored and negated, the tempo for the side to move is one constant, a term the search
does not need (every leaf of a fixed-depth search has the same side to move). The quiet rows of
each split are written once to a temporary store and fitted there. The training log goes to
stderr.

    python scripts/quiet_study.py --data STORE/datasets/sabatelli_regression --depth 2 --openings 20
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import chess
import pyarrow as pa
import pyarrow.parquet as pq
import torch

from pipeline.datasets.datasets import SPLITS, dataset_dir
from pipeline.ingest.encoding import fens_from_columns
from pipeline.play.matches import MatchSpec, match_result, pairings, play_pairing
from pipeline.play.openings import sabatelli_openings
from pipeline.play.search import AlphaBeta, MaterialEvaluator, SearchPlayer
from pipeline.research.intervals import wilson_interval
from pipeline.store.store import Store
from training.checkpoints import evaluate, load_checkpoint
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import ModelSpec, Tapered, build_model
from training.train import TrainConfig, train

DATASET = "sabatelli_regression"
TARGET = "win_prob"
"""The column fitted: the label's win probability for the side to move."""
ENCODER = get_encoder("bitmap768")
PIECES = "PNBRQ"


def quiet(board: chess.Board) -> bool:
    """Not in check, and no capture to make: a position whose material is not about to change."""
    return not board.is_check() and not any(board.generate_legal_captures())


def write_quiet(data: Path, root: Path) -> dict[str, int]:
    """Each split file of the dataset folder `data` with its quiet rows only, in the store `root`
    (the same dataset name); rows kept per split."""
    folder = dataset_dir(Store(root), DATASET)
    folder.mkdir(parents=True)
    kept = {}
    for split in SPLITS:
        t = pq.read_table(data / f"{split}.parquet")
        cols = [t.column(c).to_pylist() for c in ("planes", "side_to_move", "castling", "ep_square")]
        keep = [quiet(chess.Board(f)) for f in fens_from_columns(*cols)]
        pq.write_table(t.filter(pa.array(keep, pa.bool_())), folder / f"{split}.parquet")
        kept[split] = sum(keep)
    return kept


def error(model: torch.nn.Module, path: Path) -> float:
    """Mean squared error of the win probability on a split file."""
    rows = ParquetBatches(path, LoaderConfig(batch_size=4096, shuffle=False), target=TARGET)
    return evaluate(model, rows, ENCODER, torch.device("cpu"), 0, 0.0, False)["mse"]


def fit(root: Path, a: argparse.Namespace, out: str) -> tuple[Tapered, list[dict]]:
    """The tables fitted to the store `root`'s dataset by the training loop (every epoch run:
    patience = epochs); its best epoch's model, and the loop's history."""
    spec = ModelSpec("tapered", lr=a.lr, notes="Texel's tuning of the traditional tables (scripts/quiet_study.py)")
    rows = pq.read_metadata(dataset_dir(Store(root), DATASET) / "train.parquet").num_rows
    cfg = TrainConfig(
        store=str(root),
        dataset=DATASET,
        encoder=ENCODER.name,
        target=TARGET,
        epochs=a.epochs,
        patience=a.epochs,
        batch_size=a.batch,
        lr=a.lr,
        seed=a.seed,
        threads=1,
        device="cpu",
        out=out,
        shuffle_buffer=rows + 1,  # every row shuffled together each epoch
    )
    r = train(cfg, log=lambda line: print(line, file=sys.stderr), preset=spec)
    model = build_model(spec, ENCODER.shape, 1)
    model.load_state_dict(load_checkpoint(r.checkpoint, map_location="cpu")["best_model"])
    return model, r.history


def piece_values(model: Tapered) -> dict[str, dict[str, int]]:
    """Each piece's average over its 64 squares (White's tables), middlegame and endgame."""
    out = {}
    for phase, table in (("middlegame", model.middle), ("endgame", model.end)):
        planes = table.detach().numpy().reshape(12, 64)
        out[phase] = {p: int(round(float(planes[i].mean()))) for i, p in enumerate(PIECES)}
    return out


def match(model: Tapered, depth: int, openings: int, quiescence: int = 0) -> dict:
    """The learnt tables against the traditional ones, both AlphaBeta at `depth` (with
    `quiescence` plies of captures beyond it); unfinished games (200 plies) count half."""
    middle, end = model.middle.detach().numpy(), model.end.detach().numpy()
    spec = MatchSpec(
        f"learnt tables vs traditional, depth {depth}" + (f", {quiescence} plies of captures" if quiescence else ""),
        lambda: SearchPlayer(
            AlphaBeta(MaterialEvaluator(middle, end, "learnt_pst"), depth=depth, quiescence=quiescence)
        ),
        lambda: SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=depth, quiescence=quiescence)),
        max_plies=200,
    )
    ops = sabatelli_openings()[:openings]
    result = match_result(spec, [play_pairing(spec, ops[i], i, c) for i, c in pairings(ops)])
    pts, w, d, lost, u = result.score(result.a)
    n = len(result.games)
    score = (pts + u / 2) / n
    lo, hi = wilson_interval(pts + u / 2, n)
    return {
        "depth": depth,
        "quiescence": quiescence,
        "games": n,
        "won": w,
        "drawn": d,
        "lost": lost,
        "unfinished": u,
        "score": score,
        "ci95": [lo, hi],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="a sabatelli_regression dataset folder (train/val/test.parquet)")
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("--lr", type=float, default=2.0, help="Adam's step, in centipawns (default 2)")
    p.add_argument("--batch", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--depth", type=int, default=2, help="search depth of the match (0: no match)")
    p.add_argument("--openings", type=int, default=20, help="Sabatelli's openings played, each twice")
    p.add_argument("--quiescence", type=int, default=0, help="plies of captures both sides search beyond the depth")
    a = p.parse_args()
    if a.quiescence < 0:  # before the fit, not minutes later at the match
        p.error(f"--quiescence is 0 (none) or plies of captures, got {a.quiescence}")
    data = Path(a.data)
    if data.name != DATASET or not all((data / f"{s}.parquet").exists() for s in SPLITS):
        p.error(f"--data must be a {DATASET} dataset folder (STORE/datasets/{DATASET}), got {a.data}")
    torch.set_num_threads(1)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="quiet_study-") as tmp:
        kept = write_quiet(data, Path(tmp) / "quiet")
        quiet_data = dataset_dir(Store(Path(tmp) / "quiet"), DATASET)
        tests = {"test_mse": data / "test.parquet", "quiet_test_mse": quiet_data / "test.parquet"}
        traditional = build_model(ModelSpec("tapered"), ENCODER.shape, 1)
        out: dict = {
            "rows": {
                "train": pq.read_metadata(data / "train.parquet").num_rows,
                "quiet_train": kept["train"],
                "test": pq.read_metadata(data / "test.parquet").num_rows,
            },
            "quiet_test_rows": kept["test"],
            "traditional": {k: error(traditional, path) for k, path in tests.items()},
        }
        for name, root in (("all_positions", data.parent.parent), ("quiet_positions", Path(tmp) / "quiet")):
            model, history = fit(root, a, f"{tmp}/{name}")
            out[name] = {
                **{k: error(model, path) for k, path in tests.items()},
                "pieces": piece_values(model),
                "tempo_cp": float(model.tempo.detach()),
                "best_epoch": min(history, key=lambda h: h["val_loss"])["epoch"],
            }
            if a.depth:
                out[name]["match"] = match(model, a.depth, a.openings, a.quiescence)
            print(json.dumps({name: out[name]}), flush=True)
    out["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
