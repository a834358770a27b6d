"""Loader throughput against the training step rate, per encoder, on a real dataset split.

    python benchmarks/loader.py [--home STORE] [--dataset sabatelli_3class] [--batches 200] [--threads 1]

Needs a materialised dataset (`chess-pipeline datasets`); without --home it builds a small
store from the FICS archives in ../shared/data (ingest, depth-1 labels, the dataset).

For each encoder: positions/s delivered as ready tensors over a whole epoch (Parquet row
groups -> shuffle buffer -> batch -> encoder on the device), and the training step rate of the small MLP
(Sabatelli's 3-class 1048-500-50, batch 256) on that input, measured in this process at the same
thread count. An encoder whose output is not one tensor (pieces837's rows per piece, for Team 44's
piece-value networks) feeds no MLP: its loader rate is printed, without a step rate.
Floor (issue 36): the loader at least 5x the step rate for every encoder that feeds an MLP; below
it the script names the encoder and its ratio and exits 1. Anchor: nnue-pytorch's C++ binpack
loader, about 1.3M positions/s.

Threads: one by default. On a 2-core machine shared with other work, torch's two intra-op
threads wait on each other at every op (bitmap768 measured 23-55k positions/s with 2 threads while
one core was busy, 430k with 1); the ratio to the step rate is what the benchmark reports.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pipeline.datasets.datasets import build_dataset, dataset_dir  # noqa: E402
from pipeline.ingest.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.labels.labels import label_store  # noqa: E402
from pipeline.labels.pool import EnginePool  # noqa: E402
from pipeline.labels.setting import LabelRun  # noqa: E402
from pipeline.labels.uci import Limit, find_stockfish  # noqa: E402
from pipeline.store.store import Store  # noqa: E402
from training.data import LoaderConfig, ParquetBatches  # noqa: E402
from training.encoders import ENCODERS  # noqa: E402
from training.models import PRESETS, build_model  # noqa: E402

NNUE_PYTORCH_LOADER = 1.3e6
FLOOR = 5.0
"""The loader's positions/s at least this many times the MLP's step rate (positions/s)."""
BATCH = 256


def small_store(tmp: Path, data: Path) -> Store:
    store = Store(tmp).ensure()
    src = data / "ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst"
    ingest_archive(store, store.add_archive(src), src, IngestConfig())
    with EnginePool(find_stockfish()) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 1)))
    build_dataset(store, "sabatelli_3class", {"label_value": 1, "min_elo": 1500})
    return store


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path, help="a store with the dataset materialised (default: build a small one)")
    ap.add_argument("--dataset", default="sabatelli_3class")
    ap.add_argument("--batches", type=int, default=0, help="batches to time the loader over (0: a whole epoch)")
    ap.add_argument("--steps", type=int, default=100, help="training steps to time")
    ap.add_argument("--threads", type=int, default=1, help="torch's CPU threads for the loader and the step alike")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    args = ap.parse_args(argv)
    if args.threads < 1:
        ap.error(f"--threads must be at least 1, not {args.threads}")
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    below = []
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        store = Store(args.home) if args.home else small_store(Path(tmp), args.data)
        path = dataset_dir(store, args.dataset) / "train.parquet"
        if not path.exists():
            print(f"{path} not found: materialise it first (chess-pipeline datasets {args.dataset})", file=sys.stderr)
            return 1
        print(f"{path} on {device}, {torch.get_num_threads()} threads, batch {BATCH}\n")
        print(f"{'encoder':<16} {'loader pos/s':>13} {'MLP step pos/s':>15} {'ratio':>7}  vs nnue-pytorch loader")
        for name, enc in ENCODERS.items():
            loader = ParquetBatches(path, LoaderConfig(batch_size=BATCH))
            n, start = 0, time.perf_counter()
            for i, batch in enumerate(loader.epoch(0)):
                x = enc(batch.to(device))
                n += batch.planes.shape[0]  # positions, whatever the encoder makes of them
                if args.batches and i + 1 >= args.batches:
                    break
            if device.type == "cuda":
                torch.cuda.synchronize()
            load_rate = n / (time.perf_counter() - start)
            versus = f"{load_rate / NNUE_PYTORCH_LOADER:.2f}x"
            if not isinstance(x, torch.Tensor):  # e.g. pieces837's PieceRows: no MLP takes it
                print(f"{name:<16} {load_rate:>13,.0f} {'(no MLP)':>15} {'':>7}  {versus}")
                continue
            step_rate = _step_rate(enc, path, device, args.steps)
            ratio = load_rate / step_rate
            print(f"{name:<16} {load_rate:>13,.0f} {step_rate:>15,.0f} {ratio:>6.1f}x  {versus}")
            if ratio < FLOOR:
                below.append((name, ratio))
    print(f"\nfloor: loader >= {FLOOR:g}x the MLP step rate for every encoder that feeds an MLP")
    for name, ratio in below:
        print(
            f"loader below the floor: {name} delivers {ratio:.1f}x the MLP step rate (floor {FLOOR:g}x)",
            file=sys.stderr,
        )
    return 1 if below else 0


def _step_rate(enc, path: Path, device: torch.device, steps: int) -> float:
    """Positions/s of the small MLP's training steps on one batch of the encoder's input."""
    model = build_model(PRESETS["mlp3"], enc.shape, 3).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = next(iter(ParquetBatches(path, LoaderConfig(batch_size=BATCH)).epoch(0))).to(device)
    x, y = enc(batch), batch.target.long()
    start = time.perf_counter()
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return steps * len(y) / (time.perf_counter() - start)


if __name__ == "__main__":
    sys.exit(main())
