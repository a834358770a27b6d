"""Loader throughput against the training step rate, per encoder, on a real dataset split.

    python benchmarks/loader.py [--home STORE] [--dataset sabatelli_3class] [--batches 200]

Needs a materialised dataset (`chess-pipeline datasets`); without --home it builds a small
store from the FICS archives in ../shared/data (ingest, depth-1 labels, the dataset).

For each encoder: positions/s delivered as ready tensors over a whole epoch (Parquet row
groups -> shuffle buffer -> batch -> encoder on the device), and the training step rate of the small MLP
(Sabatelli's 3-class 1048-500-50, batch 256) on that input, measured in this process.
Target (issue 5): the loader at least 3x the step rate. Anchor: nnue-pytorch's C++ binpack
loader, about 1.3M positions/s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from pipeline.datasets import build_dataset, dataset_dir  # noqa: E402
from pipeline.engine import EnginePool, Limit, find_stockfish  # noqa: E402
from pipeline.ingest import IngestConfig, ingest_archive  # noqa: E402
from pipeline.labels import LabelRun, label_store  # noqa: E402
from pipeline.store import Store  # noqa: E402
from training.data import LoaderConfig, ParquetBatches  # noqa: E402
from training.encoders import ENCODERS  # noqa: E402
from training.models import PRESETS, build_model  # noqa: E402

NNUE_PYTORCH_LOADER = 1.3e6


def small_store(tmp: Path, data: Path) -> Store:
    store = Store(tmp).ensure()
    src = data / "ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst"
    ingest_archive(store, store.add_archive(src), src, IngestConfig())
    with EnginePool(find_stockfish()) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 1)))
    build_dataset(store, "sabatelli_3class", {"label_value": 1, "min_elo": 1500})
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--home", type=Path)
    ap.add_argument("--dataset", default="sabatelli_3class")
    ap.add_argument("--batches", type=int, default=0, help="batches to time the loader over (0: a whole epoch)")
    ap.add_argument("--steps", type=int, default=100, help="training steps to time")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "pgn")
    args = ap.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory(prefix="bench-loader-") as tmp:
        store = Store(args.home) if args.home else small_store(Path(tmp), args.data)
        path = dataset_dir(store, args.dataset) / "train.parquet"
        print(f"{path} on {device}, {torch.get_num_threads()} threads, batch 256\n")
        print(f"{'encoder':<12} {'loader pos/s':>13} {'MLP step pos/s':>15} {'ratio':>7}  vs nnue-pytorch loader")
        for name, enc in ENCODERS.items():
            loader = ParquetBatches(path, LoaderConfig(batch_size=256))
            n, start = 0, time.perf_counter()
            for i, batch in enumerate(loader.epoch(0)):
                x = enc(batch.to(device))
                n += x.shape[0]
                if args.batches and i + 1 >= args.batches:
                    break
            load_rate = n / (time.perf_counter() - start)
            model = build_model(PRESETS["mlp3"], enc.shape, 3).to(device)
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            batch = next(iter(ParquetBatches(path, LoaderConfig(batch_size=256)).epoch(0))).to(device)
            x, y = enc(batch), batch.target.long()
            steps, start = 0, time.perf_counter()
            while steps < args.steps:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                steps += 1
            if device.type == "cuda":
                torch.cuda.synchronize()
            step_rate = steps * 256 / (time.perf_counter() - start)
            print(
                f"{name:<12} {load_rate:>13,.0f} {step_rate:>15,.0f} {load_rate / step_rate:>6.1f}x  "
                f"{load_rate / NNUE_PYTORCH_LOADER:.2f}x"
            )
        print("\ntarget: loader >= 3x the MLP step rate for every encoder")


if __name__ == "__main__":
    main()
