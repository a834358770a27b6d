"""Training on the accelerator against 2 CPU cores, in one short run on a real dataset split.

    python benchmarks/gpu.py [--home STORE] [--dataset sabatelli_3class] [--rows 200000]
                             [--epochs 2] [--models mlp3 cnn] [--json out.json] [--tiny]

Three figures, all measured in this process:

1. per encoder: the loader's positions/s (Parquet row groups -> shuffle buffer -> batch ->
   to the device -> encoder) against the training step rate of the 3-class MLP on that input
   (positions/s of forward + backward + Adam step), on the device. The loader must keep ahead
   of the model (target: >= 3x, ARCHITECTURE.md's loader anchor).
2. the speed-up of full training (training.train.train: the loader, the encoder, the steps and
   the evaluation of every epoch, as `chess-pipeline train` runs them) on the device over the
   same run on 2 CPU threads, for each model preset asked for (bitmap768 input).
3. the test accuracy of those two runs, and whether they agree within noise: the 95% interval of
   the difference of two accuracies measured on n test positions, 1.96 x sqrt(2 p (1 - p) / n)
   (both runs start from the same seed; bfloat16 autocast and other kernels on CUDA make them
   differ by about as much as another seed would).

The device is CUDA when torch sees one; otherwise every CPU core (on a 2-core machine the
"speed-up" is then about 1x: the script runs, but measures nothing about GPUs). Without
--home it builds a small store from one FICS archive of ../shared/data (ingest, depth-1 labels,
the dataset; a minute or two). --tiny: two batches and steps per encoder and a 1,000-row run, to check the script.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pipeline.datasets.datasets import dataset_dir  # noqa: E402
from pipeline.store.store import Store  # noqa: E402
from training.data import LoaderConfig, ParquetBatches  # noqa: E402
from training.encoders import ENCODERS  # noqa: E402
from training.models import PRESETS, build_model  # noqa: E402
from training.train import TrainConfig, train  # noqa: E402

BASELINE_THREADS = 2
"""The CPU baseline: this many torch threads (the 2-core machines the project is measured on)."""
BATCH = 256
"""Rows per step, as the `full` profile."""
NOT_MLP_INPUTS = {"pieces837": "one input per piece (the piece-value network), not a position"}
"""Encoders left out of the loader/step table, and why."""


def loader_rate(path: Path, enc, device: torch.device, batches: int) -> float:
    """Positions/s of the loader delivering encoded batches on the device (0 batches: an epoch)."""
    loader = ParquetBatches(path, LoaderConfig(batch_size=BATCH))
    n, start = 0, time.perf_counter()
    for i, batch in enumerate(loader.epoch(0)):
        n += enc(batch.to(device)).shape[0]
        if batches and i + 1 >= batches:
            break
    if device.type == "cuda":
        torch.cuda.synchronize()
    return n / (time.perf_counter() - start)


def warm_up(path: Path, device: torch.device) -> None:
    """One batch to the device before any timing: CUDA's context and the file's first read would
    otherwise be charged to whichever encoder comes first (bitmap768 read 55,613 positions/s
    against 188,319 for bitmap773 on an H200 before this)."""
    batch = next(iter(ParquetBatches(path, LoaderConfig(batch_size=BATCH)).epoch(0)))
    ENCODERS["bitmap768"](batch.to(device))
    if device.type == "cuda":
        torch.cuda.synchronize()


def step_rate(path: Path, enc, device: torch.device, steps: int, amp: bool = True) -> float:
    """Positions/s of the 3-class MLP's training steps on one resident batch (no loading)."""
    torch.manual_seed(0)
    model = build_model(PRESETS["mlp3"], enc.shape, 3).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = next(iter(ParquetBatches(path, LoaderConfig(batch_size=BATCH)).epoch(0))).to(device)
    x, y = enc(batch), batch.target.long()
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" and amp else None

    def step():
        if autocast is not None:
            with autocast:
                out = model(x).float()
        else:
            out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step()  # warm-up (CUDA kernels, allocator)
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * x.shape[0] / (time.perf_counter() - start)


def training_run(store: Path, dataset: str, model: str, device: str, threads: int, rows: int, epochs: int, out: Path):
    """One training.train run; (wall seconds, its TrainResult)."""
    cfg = TrainConfig(
        store=str(store),
        dataset=dataset,
        model=model,
        encoder="bitmap768",
        epochs=epochs,
        patience=epochs + 1,  # run every epoch on both devices
        batch_size=BATCH,
        max_train_rows=rows,
        max_eval_rows=max(rows // 4, 1000),
        device=device,
        threads=threads,
        out=str(out),
        seed=0,
    )
    start = time.perf_counter()
    result = train(cfg, log=lambda _msg: None)
    return time.perf_counter() - start, result


def noise_95(p: float, n: int) -> float:
    """Half-width of the 95% interval of the difference of two accuracies p on n positions each."""
    return 1.96 * math.sqrt(2 * p * (1 - p) / n) if n else float("nan")


def print_training_row(model: str, r: dict) -> None:
    """One model's line of the training table, printed as soon as its two runs are done."""
    a, b = r["cpu2"], r["device"]
    print(
        f"{model:<10} {a['seconds']:>8.1f} {b['seconds']:>9.1f} {r['speedup_wall']:>8.2f}x "
        f"{r['speedup_training_steps']:>7.2f}x {a['test_accuracy']:>9.4f} {b['test_accuracy']:>8.4f}  "
        f"{'within' if r['within_noise'] else 'OUTSIDE'} +/-{r['noise_95']:.4f} on {a['test_rows']:,} positions "
        f"(majority {a['majority_class_accuracy']:.4f}, material {a['material_baseline_accuracy']:.4f})",
        flush=True,
    )


def run(home: Path, dataset: str, models: list[str], rows: int, epochs: int, batches: int, steps: int) -> dict:
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    cores = os.cpu_count() or 1
    torch.set_num_threads(cores)
    path = dataset_dir(Store(home), dataset) / "train.parquet"
    if not path.exists():
        raise SystemExit(
            f"benchmarks/gpu.py: {path} not found: build it (chess-pipeline --home {home} datasets {dataset})"
        )
    card = torch.cuda.get_device_name(0) if cuda else f"CPU, {cores} cores (no CUDA device)"
    report: dict = {"device": card, "cores": cores, "dataset": dataset, "rows": rows, "epochs": epochs, "encoders": {}}
    print(f"{path}\ndevice: {card}; baseline: {BASELINE_THREADS} CPU threads; batch {BATCH}\n")
    warm_up(path, device)
    print(f"{'encoder':<22} {'loader pos/s':>13} {'MLP step pos/s':>15} {'loader/step':>12}")
    for name, enc in ENCODERS.items():
        if name in NOT_MLP_INPUTS:
            print(f"{name:<22} left out: {NOT_MLP_INPUTS[name]}")
            continue
        load = loader_rate(path, enc, device, batches)
        step = step_rate(path, enc, device, steps)
        report["encoders"][name] = {"loader_positions_per_second": load, "step_positions_per_second": step}
        print(f"{name:<22} {load:>13,.0f} {step:>15,.0f} {load / step:>11.1f}x")
    report["training"] = {}
    print(
        f"\ntraining (bitmap768, {rows:,} train rows, {epochs} epochs, batch {BATCH}): "
        f"{card} against {BASELINE_THREADS} CPU threads"
    )
    print(
        f"{'model':<10} {'cpu2 s':>8} {'device s':>9} {'speed-up':>9} {'steps x':>8} "
        f"{'acc cpu2':>9} {'acc dev':>8}  agree"
    )
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        for model in models:
            runs = {}
            for label, dev, threads in (("cpu2", "cpu", BASELINE_THREADS), ("device", device.type, cores)):
                seconds, r = training_run(home, dataset, model, dev, threads, rows, epochs, Path(tmp) / model / label)
                runs[label] = {
                    "seconds": seconds,
                    "train_positions_per_second": r.positions_per_second,
                    "test_accuracy": r.test.get("accuracy"),
                    "test_rows": r.test.get("rows", 0),
                    "majority_class_accuracy": r.test.get("majority_class_accuracy"),
                    "material_baseline_accuracy": r.test.get("material_baseline_accuracy"),
                    "epochs": len(r.history),
                }
            a, b = runs["cpu2"], runs["device"]
            p = (a["test_accuracy"] + b["test_accuracy"]) / 2
            noise = noise_95(p, a["test_rows"])
            runs["speedup_wall"] = a["seconds"] / b["seconds"]
            runs["speedup_training_steps"] = b["train_positions_per_second"] / max(
                a["train_positions_per_second"], 1e-9
            )
            runs["accuracy_difference"] = b["test_accuracy"] - a["test_accuracy"]
            runs["noise_95"] = noise
            runs["within_noise"] = abs(runs["accuracy_difference"]) <= noise
            report["training"][model] = runs
            print_training_row(model, runs)
    return report


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="a store with the dataset built (else a small one is made)")
    ap.add_argument("--dataset", default="sabatelli_3class", choices=["sabatelli_3class", "lubeck_wdl"])
    ap.add_argument("--models", nargs="+", default=["mlp3"], choices=["mlp3", "cnn", "lubeck"])
    ap.add_argument("--rows", type=int, default=200_000, help="train rows of each training run (0: all)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs of each training run")
    ap.add_argument("--batches", type=int, default=0, help="batches to time the loader over (0: a whole epoch)")
    ap.add_argument("--steps", type=int, default=100, help="training steps to time per encoder")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--tiny", action="store_true", help="2 batches, 2 steps, a 1,000-row run: checks the script")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    args = ap.parse_args(argv)
    if args.tiny:
        args.rows, args.epochs, args.batches, args.steps = 1000, 1, 2, 2
    with tempfile.TemporaryDirectory(prefix="bench-gpu-store-") as tmp:
        if args.home:
            home = args.home
        else:
            from benchmarks.loader import small_store

            home = small_store(Path(tmp), args.data).root
        report = run(home, args.dataset, args.models, args.rows, args.epochs, args.batches, args.steps)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
