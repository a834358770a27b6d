"""Issue 39's study: does a stronger network's output, as the target, lift a weaker input's network?

Trains one preset on one encoder (Sabatelli's algebraic MLP: `mlp3_regularised` on `algebraic`)
against a teacher's class probabilities in place of the rows' classes (distillation: cross-entropy
with the teacher's softmax, temperature 1), on the same shuffled train rows, a-h mirroring, weight
decay and decaying rate as `python -m training.train` gives the preset, keeping the epoch of best
validation loss (on the rows' own classes), and prints one JSON line: test accuracy beside the
material rule and the teacher, and the lead over material with its 95% interval, paired and
clustered by game, as a training run scores its own (training.train.figures_on_test).

The teacher must have been trained on this store's own splits (the same files: path, rows and
bytes its checkpoint records), so that no val or test game reaches the student through it.

    python scripts/distil_study.py --store STORE --teacher STORE/models/.../checkpoint.pt \\
        --model mlp3_regularised --encoder algebraic --dropout 0 --epochs 8

docs/results/regularised.md says which figures came from this script.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import torch

from pipeline.datasets.datasets import DATASETS, SPLITS, dataset_dir
from pipeline.store.store import Store
from training.checkpoints import evaluate, load_model
from training.data import LoaderConfig, ParquetBatches
from training.encoders import file_mirrorable, get_encoder, mirror_files
from training.models import PRESETS, build_model
from training.train import figures_on_test, lineage, train_baseline_rows


def study(args) -> dict:
    torch.set_num_threads(args.threads)
    folder = dataset_dir(Store(args.store), args.dataset)
    teacher, ck = load_model(args.teacher)
    mine, theirs = lineage(folder), ck["dataset"]["splits"]
    if ck["config"]["dataset"] != args.dataset or any(
        mine[s][k] != theirs[s][k] for s in SPLITS for k in ("path", "rows", "bytes")
    ):
        raise ValueError(
            f"{args.teacher} was not trained on {folder} as it is now: train the teacher on this "
            "store's splits first (its val and test games must stay unseen)"
        )
    classes = DATASETS[args.dataset].classes
    t_enc, enc = get_encoder(ck["encoder"]["name"]), get_encoder(args.encoder)
    spec = PRESETS[args.model]
    if args.dropout is not None:
        spec = dataclasses.replace(spec, dropout=args.dropout)
    if spec.optimizer != "adam":
        raise ValueError(f"{args.model} trains with {spec.optimizer}: this study runs Adam(W) presets only")
    torch.manual_seed(args.seed)
    model = build_model(spec, enc.shape, classes)
    opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay)
    train_b = ParquetBatches(folder / "train.parquet", LoaderConfig(batch_size=args.batch), seed=args.seed)
    val_b, test_b = (
        ParquetBatches(folder / f"{s}.parquet", LoaderConfig(batch_size=4096, shuffle=False)) for s in ("val", "test")
    )
    cpu = torch.device("cpu")
    best, best_state, history = float("inf"), None, []
    for epoch in range(args.epochs):
        torch.manual_seed(args.seed * 1000 + epoch)
        for g in opt.param_groups:
            g["lr"] = spec.lr * spec.lr_decay**epoch
        model.train()
        t0, loss_sum, n = time.monotonic(), 0.0, 0
        for b in train_b.epoch(epoch):
            if spec.mirror_files:
                b = mirror_files(b, file_mirrorable(b) & (torch.rand(len(b.castling)) < 0.5))
            with torch.no_grad():
                p = torch.softmax(teacher(t_enc(b)), 1)
            loss = -(p * torch.log_softmax(model(enc(b)), 1)).sum(1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum, n = loss_sum + loss.item() * len(p), n + len(p)
        val = evaluate(model, val_b, enc, cpu, classes, 0, False)
        row = {"epoch": epoch, "train_loss": loss_sum / n, "val_loss": val["loss"], "val_accuracy": val["accuracy"]}
        history.append(row)
        print(json.dumps(row | {"positions_per_second": round(n / (time.monotonic() - t0))}), file=sys.stderr)
        if val["loss"] < best:
            best, best_state = val["loss"], copy.deepcopy(model.state_dict())
    model.load_state_dict(best_state)
    games = pq.read_table(folder / "test.parquet", columns=["game_id"]).column(0).to_numpy()
    fitted_on = train_baseline_rows(train_b, args.dataset)
    test = figures_on_test(model, test_b, fitted_on, enc, cpu, args.dataset, 0.0, False, games)
    return {
        "test_accuracy": test["accuracy"],
        "material_accuracy": test["material_baseline_accuracy"],
        "material_lead": test["material_lead"],
        "material_lead_ci95": test["material_lead_ci95"],
        "teacher_test_accuracy": evaluate(teacher, test_b, t_enc, cpu, classes, 0, False)["accuracy"],
        "best_epoch": int(np.argmin([h["val_loss"] for h in history])),
        "rows": test["rows"],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", required=True, help="the store whose dataset both networks train on")
    ap.add_argument("--dataset", default="sabatelli_3class", help="a class dataset (default sabatelli_3class)")
    ap.add_argument("--teacher", required=True, help="checkpoint.pt of a model trained on the same train split")
    ap.add_argument("--model", default="mlp3_regularised", help="the student's preset (default mlp3_regularised)")
    ap.add_argument("--encoder", default="algebraic", help="the student's input (default algebraic)")
    ap.add_argument("--dropout", type=float, default=None, help="replace the preset's dropout")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        print(json.dumps(study(args)))
    except (ValueError, FileNotFoundError) as e:
        sys.exit(f"distil_study: {e}")


if __name__ == "__main__":
    main()
