"""Issue 19's study: which networks beat the material rule on a small 3-class set, and by how much.

Trains one variant of a small MLP on a `sabatelli_3class` dataset through the training loop
(training.train.train, single-threaded unless --threads, early stopping on validation loss
keeping the best epoch), the variant given as a ModelSpec (train's `preset` hook: hidden widths,
dropout, weight decay, the rate's decay an epoch, a-h mirroring, a linear map of the counts added
to the logits, class weights), and prints one JSON line: test accuracy beside the majority class
and the material rule (training.baselines' rule: win or loss when material is at least 2 pawns
apart), and the leads over both with their 95% intervals, paired and clustered by game
(training.train.baseline_leads). `--external FILE` scores the same model on another file of rows
(e.g. `--build-external`'s archives the set was not built from); `--checkpoint` scores a
`python -m training.train` run's model on it. The training log goes to stderr. `mlp_material`
and `mlp_counts` are the presets of two of its variants; docs/results/training.md and
regularised.md say which figures came from this script.

    python scripts/material_study.py --data STORE/datasets/sabatelli_3class --inputs bits+counts \\
        --hidden 256,64 --weight-decay 0.01 --mirror-files --epochs 8 --patience 3 --batch 256
    python scripts/material_study.py --build-external STORE --exclude DEMO_STORE --out /tmp/ext.parquet
    python scripts/material_study.py --checkpoint RUN/checkpoint.pt --external /tmp/ext.parquet
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from torch import nn

from training.baselines import material_predictions
from training.checkpoints import evaluate, load_checkpoint
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import ModelSpec, build_model
from training.train import TrainConfig, baseline_leads, load_model, paired_lead, train

DATASET = "sabatelli_3class"

INPUTS = {
    "bits": "bitmap768",
    "counts": "piece_counts",
    "bits+counts": "bitmap768_counts",
    "alg": "algebraic",
    "alg-onehot": "algebraic_onehot",
}
"""--inputs -> the encoder the training loop reads (training.encoders)."""


def score(model: nn.Module, encoder, path: str, majority: int = 1) -> dict:
    """A model scored on a file of 3-class rows: its accuracy, the majority class (train's; draw) and the
    material rule on the same rows, its leads over both with their 95% intervals clustered by
    game (training.train.baseline_leads), and the material lead's interval taking rows as
    independent (`material_lead_ci95_by_row`)."""
    rows = ParquetBatches(path, LoaderConfig(batch_size=4096, shuffle=False))
    scored: dict = {}  # each row's target, prediction and material, from the same pass
    out = evaluate(model, rows, encoder, torch.device("cpu"), 3, 0.0, False, scored)
    games = pq.read_table(path, columns=["game_id"]).column(0).to_numpy()[: rows.rows]
    y = np.asarray(scored["target"]).astype(np.int64)
    right = np.asarray(scored["prediction"]).astype(np.int64) == y
    by_material = material_predictions(DATASET, np.asarray(scored["material"], dtype=np.float32)) == y
    return {
        "rows": rows.rows,
        "games": int(len(np.unique(games))),
        "accuracy": out["accuracy"],
        "majority": float((y == majority).mean()),
        "material": float(by_material.mean()),
        **baseline_leads(scored, DATASET, majority, games),
        "material_lead_ci95_by_row": paired_lead(right, by_material)[1],
    }


def run(a: argparse.Namespace, out_dir: str) -> dict:
    """One variant through the training loop (training.train.train with this variant's ModelSpec),
    its checkpoint in `out_dir`; its best epoch scored on test (and on --external)."""
    data = Path(a.data)
    if data.name != DATASET or not (data / "train.parquet").exists():
        raise SystemExit(f"--data must be a {DATASET} dataset folder (STORE/datasets/{DATASET}), got {a.data}")
    if a.inputs not in INPUTS:
        raise SystemExit(f"--inputs must be one of {', '.join(INPUTS)}, got {a.inputs!r}")
    spec = ModelSpec(
        "mlp",
        hidden=tuple(int(x) for x in a.hidden.split(",") if x),
        dropout=a.dropout,
        lr=a.lr,
        weight_decay=a.weight_decay,
        lr_decay=a.lr_decay,
        mirror_files=a.mirror_files,
        count_logits=a.residual,
        class_weight=a.class_weight,
    )
    cfg = TrainConfig(
        store=str(data.parent.parent),
        dataset=DATASET,
        encoder=INPUTS[a.inputs],
        epochs=a.epochs,
        patience=a.patience,
        batch_size=a.batch,
        seed=a.seed,
        lr=a.lr,
        max_train_rows=a.train_limit,
        max_eval_rows=0,
        max_minutes=0.0,
        threads=a.threads,
        device="cpu",
        out=out_dir,
    )
    t0 = time.monotonic()
    r = train(cfg, log=lambda line: print(line, file=sys.stderr), preset=spec)
    encoder = get_encoder(cfg.encoder)
    model = build_model(spec, encoder.shape, 3)
    model.load_state_dict(load_checkpoint(r.checkpoint, map_location="cpu")["best_model"])
    best = min(r.history, key=lambda h: h["val_loss"])["epoch"]
    history = [[h["epoch"], round(h["val_loss"], 4), round(h["val_accuracy"], 4)] for h in r.history]
    out = {"args": vars(a), "train_rows": r.rows["train"], "best_epoch": best, "history": history}
    majority = int(r.test["majority_class"])  # train's
    out["test"] = score(model, encoder, str(data / "test.parquet"), majority)
    if a.external:
        out["external"] = score(model, encoder, a.external, majority)
    out["seconds"] = round(time.monotonic() - t0, 1)
    return out


def build_external(store: str, exclude: str, out: str) -> int:
    """Static-labelled 3-class rows (as sabatelli_3class: both players over 2000, side to move's
    view) of the store's archives other than the demo's (ficsgamesdb_2024*), one per distinct
    position, none of the positions of `exclude`'s train and val splits."""
    from pipeline.store import duck
    from pipeline.store.store import Store

    seen = [f"{exclude}/datasets/sabatelli_3class/{s}.parquet" for s in ("train", "val")]
    with duck.memory_connection(Store(store)) as con:
        con.execute("CREATE TEMP TABLE seen AS SELECT position_key FROM read_parquet(?)", [seen])
        t = con.sql(
            "SELECT *, sabatelli_class3(score) AS target "
            "FROM sabatelli_positions(2000, 'static', 0, '', 'side_to_move') "
            "WHERE score IS NOT NULL AND position_key NOT IN (SELECT position_key FROM seen) "
            "AND game_id IN (SELECT game_id FROM games WHERE archive NOT LIKE 'ficsgamesdb_2024%') "
            "QUALIFY row_number() OVER (PARTITION BY position_key ORDER BY game_id, ply) = 1 ORDER BY game_id, ply"
        ).arrow()
        t = t.read_all() if hasattr(t, "read_all") else t
    pq.write_table(t, out)
    return t.num_rows


def score_checkpoint(checkpoint: str, path: str) -> dict:
    """A training run's model (its best epoch: training.train.load_model) scored on a file of
    3-class rows (score)."""
    model, ck = load_model(checkpoint)
    return score(model, get_encoder(ck["encoder"]["name"]), path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="a sabatelli_3class dataset folder (train/val/test.parquet)")
    p.add_argument("--external", default="", help="another file of 3-class rows to score the model on")
    p.add_argument("--inputs", default="bits", help=f"one of {', '.join(INPUTS)} (default bits)")
    p.add_argument("--hidden", default="1048,500,50", help="hidden widths, comma-separated (empty: linear)")
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument(
        "--residual", action="store_true", help="add a linear map of the counts to the logits (inputs with bits)"
    )
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW's (0: Adam)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-decay", type=float, default=1.0, help="the rate is multiplied by this after every epoch")
    p.add_argument("--mirror-files", action="store_true", help="a-h mirroring of rows without castling rights")
    p.add_argument("--class-weight", action="store_true", help="weigh classes by their inverse frequency")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads of the training run")
    p.add_argument("--train-limit", type=int, default=0, help="first rows of train only (0: all)")
    p.add_argument("--build-external", metavar="STORE", help="write --out from STORE's other archives, then stop")
    p.add_argument("--exclude", metavar="STORE", help="with --build-external: the store whose train/val to leave out")
    p.add_argument("--out", help="with --build-external: the Parquet file to write")
    p.add_argument("--checkpoint", help="score this training run's checkpoint on --external, then stop")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.checkpoint:
        if not a.external:
            p.error("--checkpoint needs --external FILE")
        print(json.dumps(score_checkpoint(a.checkpoint, a.external)))
        return
    if a.build_external:
        if not (a.exclude and a.out):
            p.error("--build-external needs --exclude STORE and --out FILE")
        print(f"{build_external(a.build_external, a.exclude, a.out):,} rows in {a.out}")
        return
    if not a.data:
        p.error("--data DATASET_FOLDER is required")
    with tempfile.TemporaryDirectory(prefix="material_study-") as out_dir:  # the run's checkpoint
        print(json.dumps(run(a, out_dir)))


if __name__ == "__main__":
    main()
