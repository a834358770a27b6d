"""Full-scale training on the accelerator: each named model at its `full` profile, every row.

    python benchmarks/gpu_full.py --home STORE --out DIR [--minutes M] [--device cuda] [MODEL ...]

For each model of the catalog (training/catalog.py; default: the five published families'
networks below) it runs training.train.train with the full profile's schedule (every train row,
early stopping; DeepChess's and the piece-value network's own pretraining), on the device, and
writes DIR/<model>.json as soon as that model is done (test figures, every epoch's history,
rows, seconds, positions/s), so a run cut short still keeps what it finished. The piece-value
network also gets Team 44's table (the mean value of each piece type, pawn = 1, by game phase).

`--minutes M` bounds each model's training (max_minutes; pretraining gets at most half of it, as
everywhere): a model stopped by it says so (`stopped_by` in its JSON and its printed row). The
store must hold the models' datasets (`chess-pipeline datasets ...`). --tiny: 1,000 train rows,
one epoch, on CPU unless --device says otherwise; it checks the script.

Dagster-free (training/ and pipeline/ only), so it runs on a machine that has torch, pyarrow,
duckdb and python-chess and a copy of the store's datasets.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import get_args

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.store.store_files import atomic_path  # noqa: E402
from training.catalog import MODELS, schedule  # noqa: E402
from training.choices import Device  # noqa: E402

DEFAULT_MODELS = ["mlp_bitmap_3class", "lubeck_wdl_mlp", "cnn_bitmap_3class", "deepchess_net", "piece_value_net"]
"""One network of each published family, cheapest first (what a short device lease finishes)."""


def run_model(name: str, home: Path, out: Path, device: str, minutes: float, tiny: bool) -> dict:
    from training.config import TrainConfig
    from training.train import train

    m = MODELS[name]
    p = schedule(name, "full")
    if minutes > 0:
        p["max_minutes"] = minutes
    if tiny:
        p.update(epochs=1, max_train_rows=1000, max_eval_rows=1000, max_minutes=1.0)
        if p.get("pretrain_epochs", -1) != -1:
            p["pretrain_epochs"] = 1
    cfg = TrainConfig(
        store=str(home),
        dataset=m.dataset,
        model=m.model,
        encoder=m.encoder,
        target=m.target,
        out=str(out / "runs" / name),
        device=device,
        **p,
    )
    t0 = time.monotonic()
    r = train(cfg)
    rec = {
        "model": name,
        "config": asdict(cfg),
        "seconds": round(time.monotonic() - t0, 1),
        "device": r.device,
        "epochs_run": r.epochs_run,
        "stopped_by": r.stopped_by,
        "rows": r.rows,
        "positions_per_second": r.positions_per_second,
        "test": r.test,
        "history": r.history,
        "pretrain": r.pretrain,
    }
    if m.model.startswith("piece_value"):
        from training.piece_values import evaluate_checkpoint

        rep, _ = evaluate_checkpoint(r.checkpoint, max_rows=p["max_eval_rows"], device=r.device or "cpu")
        rec["piece_values"] = asdict(rep)
    return rec


def summary(rec: dict) -> str:
    t = {k: v for k, v in rec["test"].items() if isinstance(v, (int, float))}
    nan = float("nan")
    if "accuracy" in t:
        fig = f"test accuracy {t['accuracy']:.2%}"
        if "material_baseline_accuracy" in t:
            maj = t.get("majority_class_accuracy", nan)
            fig += f" (material {t['material_baseline_accuracy']:.2%}, majority {maj:.2%})"
    else:
        fig = f"test mse {t.get('mse', nan):.3f} (material line {t.get('material_baseline_mse', nan):.3f})"
    if "piece_values" in rec:
        rel = rec["piece_values"].get("relative", {})
        fig += ", N/B/R/Q " + "/".join(f"{rel.get(k, float('nan')):.2f}" for k in ("knight", "bishop", "rook", "queen"))
    best = min(rec["history"], key=lambda e: e["val_loss"])["epoch"] if rec["history"] else None
    stop = f", stopped by {rec['stopped_by']}" if rec["stopped_by"] else ""
    return (
        f"{rec['model']}: {fig} on {t.get('rows', 0):,} test rows; {rec['epochs_run']} epochs "
        f"(best {best}) on {rec['rows'].get('train', 0):,} train rows in {rec['seconds']:.0f} s{stop} [{rec['device']}]"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=DEFAULT_MODELS, help=f"catalog models (default: {DEFAULT_MODELS})")
    ap.add_argument("--home", type=Path, required=True, help="a store holding the models' datasets")
    ap.add_argument("--out", type=Path, required=True, help="folder for <model>.json and the checkpoints")
    ap.add_argument("--device", default="auto", choices=get_args(Device))
    ap.add_argument("--minutes", type=float, default=0.0, help="bound on each model's training (0: none)")
    ap.add_argument("--tiny", action="store_true", help="1,000 rows, one epoch: checks the script")
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        ap.error(f"unknown model(s) {unknown}: use catalog names ({', '.join(MODELS)})")
    if not (math.isfinite(args.minutes) and args.minutes >= 0):
        ap.error(f"--minutes must be >= 0, got {args.minutes}")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        print(f"== {name}: {schedule(name, 'full')}", flush=True)
        try:
            rec = run_model(name, args.home, args.out, args.device, args.minutes, args.tiny)
        except Exception as e:  # one model's failure must not cost the others their device time
            print(f"{name} failed: {type(e).__name__}: {e}", flush=True)
            continue
        with atomic_path(args.out / f"{name}.json") as tmp:  # a run killed mid-write leaves no half file
            tmp.write_text(json.dumps(rec, default=str, indent=1))
        print(summary(rec), flush=True)


if __name__ == "__main__":
    main()
