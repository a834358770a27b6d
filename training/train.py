"""Training loop: one dataset split, one encoder, one model preset; runs without Dagster.

    python -m training.train --store ./store --dataset sabatelli_3class --model mlp3 \\
        --encoder bitmap768 --epochs 5 --out ./runs/mlp3

Early stopping on validation loss; a checkpoint (model, optimizer, config, encoder name and
version, dataset lineage, history) after every epoch; a run pointed at an existing
checkpoint of the same configuration resumes after its last epoch. Each epoch seeds its own
shuffling and dropout from (seed, epoch), so a resumed run ends with the same weights as an
uninterrupted one.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import time
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, get_args, get_origin

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch import nn

from pipeline.datasets import DATASETS, SPLITS, Pov, dataset_dir
from pipeline.store import Store, atomic_path, default_root
from training.choices import Device, check_choice
from training.data import LoaderConfig, ParquetBatches
from training.encoders import ENCODERS, get_encoder
from training.models import PRESETS, OptimizerName, build_model

CP_PER_UNIT = {"sabatelli_regression": 2 * DATASETS["sabatelli_regression"].defaults["clip_cp"], "piece_values": 100}
"""Centipawns per unit of a regression target (for the cp mean absolute error)."""
REGISTRIES = {"dataset": DATASETS, "model": PRESETS, "encoder": ENCODERS}
"""The TrainConfig fields that name an entry of a registry, and that registry."""


@dataclass
class TrainConfig:
    store: str = ""
    """Store root holding datasets/<dataset>/{train,val,test}.parquet; empty: $CHESS_PIPELINE_HOME,
    else ./store (the CLI's store), resolved when the run starts."""
    dataset: str = "sabatelli_3class"
    """Dataset name (sql/datasets/)."""
    model: str = "mlp3"
    """Model preset (training.models.PRESETS)."""
    encoder: str = "bitmap768"
    """Input encoder (training.encoders.ENCODERS)."""
    hidden: tuple[int, ...] = ()
    """Replace the preset's hidden widths (empty keeps them)."""
    epochs: int = 20
    """Most epochs; early stopping may end sooner."""
    patience: int = 3
    """Stop after this many epochs without a better validation loss."""
    batch_size: int = 256
    lr: float = 0.0
    """Learning rate; 0 takes the preset's."""
    max_train_rows: int = 0
    """Use only the first rows of train (0: all); for short CPU schedules."""
    max_eval_rows: int = 0
    """Use only the first rows of val and test (0: all)."""
    max_minutes: float = 0.0
    """Stop once this wall time has passed, cutting the epoch short (0: no bound). A run cut
    inside an epoch does not resume to the same weights as an uninterrupted one."""
    seed: int = 0
    device: Device = "auto"
    """auto (CUDA when present, else CPU), cpu or cuda."""
    amp: bool = True
    """bfloat16 autocast on CUDA."""
    threads: int = 0
    """CPU threads (0: every core)."""
    out: str = ""
    """Folder for checkpoint.pt; empty: <store>/models/<dataset>-<model>-<encoder>."""
    shuffle_buffer: int = 262_144

    def __post_init__(self):
        self.check()

    def check(self) -> None:
        """Refuse a misspelled choice (dataset, model, encoder, device), naming the valid values."""
        for name, valid in config_choices().items():
            check_choice(name, getattr(self, name), valid)


def config_choices(cls: type = TrainConfig) -> dict[str, tuple[str, ...]]:
    """The valid values of each choice field of a config dataclass: a Literal field's values, or
    the names of the registry (REGISTRIES) the field picks from. The CLI's `choices=` too."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in REGISTRIES:
            out[f.name] = tuple(REGISTRIES[f.name])
        elif get_origin(hints[f.name]) is Literal:
            out[f.name] = get_args(hints[f.name])
    return out


@dataclass
class TrainResult:
    checkpoint: Path
    history: list[dict] = field(default_factory=list)
    test: dict = field(default_factory=dict)
    epochs_run: int = 0
    resumed_from: int = 0
    positions_per_second: float = 0.0
    rows: dict = field(default_factory=dict)
    device: str = ""

    def metric_rows(self) -> list[tuple[str, str, float]]:
        """(split, metric, value) rows for model_metrics: every numeric test figure, the last
        losses, the speed."""
        rows = [("test", key, float(value)) for key, value in self.test.items() if isinstance(value, (int, float))]
        if self.history:
            last = self.history[-1]
            rows += [("train", "loss", last["train_loss"]), ("val", "loss", last["val_loss"])]
            if last.get("val_accuracy") is not None:
                rows.append(("val", "accuracy", last["val_accuracy"]))
        rows.append(("train", "positions_per_second", self.positions_per_second))
        return rows


def resolve_device(name: Device) -> torch.device:
    check_choice("device", name, get_args(Device))
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda asked for, but torch sees no CUDA device")
    return torch.device(name)


def lineage(folder: Path) -> dict:
    """What a model is trained on: each split file of a dataset folder with its size, rows and mtime."""
    out = {}
    for s in SPLITS:
        p = folder / f"{s}.parquet"
        st = p.stat()
        out[s] = {"path": str(p), "rows": pq.read_metadata(p).num_rows, "bytes": st.st_size, "mtime": st.st_mtime}
    return out


def rows_pov(train: Path) -> Pov:
    """'side_to_move' when the rows mirror Black-to-move positions (Sabatelli's datasets), else 'white'."""
    if "mirrored" not in pq.read_schema(train).names:
        return "white"
    return "side_to_move" if pc.any(pq.read_table(train, columns=["mirrored"])["mirrored"]).as_py() else "white"


def _same_run(a: dict, b: dict) -> bool:
    """Whether a checkpoint's config continues this one (only the stopping rules may differ)."""
    loose = {"epochs", "patience", "max_minutes", "device", "threads", "out", "amp"}
    return {k: v for k, v in a.items() if k not in loose} == {k: v for k, v in b.items() if k not in loose}


def evaluate(
    model: nn.Module, batches: ParquetBatches, encoder, device, classes: int, cp_per_unit: float, amp: bool
) -> dict:
    """Loss and the metrics of a split: accuracy, confusion matrix, per-class accuracy (classes),
    or MSE, MAE and cp MAE (regression)."""
    model.eval()
    total, loss_sum, correct, abs_sum = 0, 0.0, 0, 0.0
    confusion = np.zeros((classes, classes), dtype=np.int64) if classes else None
    with torch.no_grad(), _autocast(device, amp):
        for batch in batches.epoch(0):
            batch = batch.to(device)
            out = model(encoder(batch)).float()
            y = batch.target
            if classes:
                t = y.long()
                loss_sum += nn.functional.cross_entropy(out, t, reduction="sum").item()
                pred = out.argmax(1)
                correct += (pred == t).sum().item()
                np.add.at(confusion, (t.cpu().numpy(), pred.cpu().numpy()), 1)
            else:
                p = out.squeeze(1)
                loss_sum += nn.functional.mse_loss(p, y, reduction="sum").item()
                abs_sum += (p - y).abs().sum().item()
            total += len(y)
    if not total:
        return {"rows": 0}
    m = {"rows": total, "loss": loss_sum / total}
    if classes:
        m["accuracy"] = correct / total
        m["confusion"] = confusion.tolist()
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.diag(confusion) / confusion.sum(1)
        m["per_class_accuracy"] = [None if np.isnan(v) else float(v) for v in per]
        m["majority_class_accuracy"] = float(confusion.sum(1).max() / total)
    else:
        m["mse"] = m["loss"]
        m["mae"] = abs_sum / total
        m["cp_mae"] = m["mae"] * cp_per_unit
    return m


def _autocast(device: torch.device, amp: bool):
    if device.type == "cuda" and amp:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def _optimizer(name: OptimizerName, params, lr: float) -> torch.optim.Optimizer:
    check_choice("optimizer", name, get_args(OptimizerName))
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True)
    return torch.optim.Adam(params, lr=lr)


def train(cfg: TrainConfig, log=print) -> TrainResult:
    cfg.check()  # again: a field may have been set after the config was made
    spec = DATASETS[cfg.dataset]
    preset = PRESETS[cfg.model]
    if cfg.hidden:
        preset = dataclasses.replace(preset, hidden=tuple(cfg.hidden))
    lr = cfg.lr or preset.lr
    encoder = get_encoder(cfg.encoder)
    device = resolve_device(cfg.device)
    torch.set_num_threads(cfg.threads or os.cpu_count() or 1)
    store = Path(cfg.store).expanduser().resolve() if cfg.store else default_root()
    cfg = dataclasses.replace(cfg, store=str(store))  # the checkpoint records the store used
    folder = dataset_dir(Store(store), cfg.dataset)
    if not (folder / "train.parquet").exists():
        raise FileNotFoundError(
            f"{folder}/train.parquet not found: materialise the dataset first (chess-pipeline datasets {cfg.dataset})"
        )
    # The files this run reads (once), and how their rows are oriented (players need it).
    source = {"name": cfg.dataset, "splits": lineage(folder), "pov": rows_pov(folder / "train.parquet")}
    loader = LoaderConfig(batch_size=cfg.batch_size, shuffle_buffer=cfg.shuffle_buffer)
    evaluation = LoaderConfig(batch_size=4096, shuffle=False)
    train_b = ParquetBatches(folder / "train.parquet", loader, seed=cfg.seed, limit=cfg.max_train_rows)
    val_b = ParquetBatches(folder / "val.parquet", evaluation, limit=cfg.max_eval_rows)
    test_b = ParquetBatches(folder / "test.parquet", evaluation, limit=cfg.max_eval_rows)
    for split, b in (("train", train_b), ("val", val_b), ("test", test_b)):
        if not b.rows:
            raise ValueError(f"{folder}/{split}.parquet has no rows: more games, or other split fractions")
    classes = spec.classes
    n_out = classes or 1
    torch.manual_seed(cfg.seed)
    model = build_model(preset, encoder.shape, n_out).to(device)
    opt = _optimizer(preset.optimizer, model.parameters(), lr)
    out_dir = Path(cfg.out) if cfg.out else store / "models" / f"{cfg.dataset}-{cfg.model}-{cfg.encoder}"
    ckpt_path = out_dir / "checkpoint.pt"
    config = asdict(cfg)
    config["hidden"] = list(cfg.hidden)
    history: list[dict] = []
    start_epoch, best_loss, best_state, bad = 0, float("inf"), None, 0
    result = TrainResult(
        ckpt_path, device=str(device), rows={"train": train_b.rows, "val": val_b.rows, "test": test_b.rows}
    )
    if ckpt_path.exists():
        ck = torch.load(ckpt_path, map_location=device, weights_only=False)
        if _same_run(ck["config"], config) and ck["encoder"] == {"name": encoder.name, "version": encoder.version}:
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            history, best_loss, bad = ck["history"], ck["best_val_loss"], ck["bad_epochs"]
            best_state = ck["best_model"]
            start_epoch = result.resumed_from = ck["epoch"] + 1
            log(f"resuming from {ckpt_path} after epoch {ck['epoch']}")
            if ck.get("stopped_early"):
                start_epoch = cfg.epochs
        else:
            log(f"{ckpt_path} holds another configuration: starting afresh")
    loss_fn = nn.CrossEntropyLoss() if classes else nn.MSELoss()
    cp_unit = CP_PER_UNIT.get(cfg.dataset, 1.0)
    t0 = time.monotonic()
    seen, train_seconds = 0, 0.0
    stopped_early = False
    for epoch in range(start_epoch, cfg.epochs):
        torch.manual_seed(cfg.seed * 1000 + epoch)  # dropout of this epoch, the same on resume
        model.train()
        e0 = time.monotonic()
        loss_sum, n = 0.0, 0
        out_of_time = False
        for batch in train_b.epoch(epoch):
            if cfg.max_minutes and time.monotonic() - t0 > cfg.max_minutes * 60:
                out_of_time = True  # a short schedule: cut this epoch, evaluate, stop
                break
            batch = batch.to(device)
            with _autocast(device, cfg.amp):
                out = model(encoder(batch)).float()
            y = batch.target.long() if classes else batch.target
            loss = loss_fn(out if classes else out.squeeze(1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            loss_sum += loss.item() * len(y)
            n += len(y)
        train_seconds += time.monotonic() - e0
        seen += n
        if not np.isfinite(loss_sum):
            raise FloatingPointError(
                f"training diverged in epoch {epoch} (loss {loss_sum / max(n, 1)}): "
                f"try a lower learning rate than {lr:g}"
            )
        val = evaluate(model, val_b, encoder, device, classes, cp_unit, cfg.amp)
        row = {
            "epoch": epoch,
            "train_loss": loss_sum / max(n, 1),
            "val_loss": val.get("loss"),
            "val_accuracy": val.get("accuracy"),
            "val_mse": val.get("mse"),
            "positions_per_second": n / max(time.monotonic() - e0, 1e-9),
        }
        history.append(row)
        log(
            f"epoch {epoch}: train loss {row['train_loss']:.4f}, val loss {row['val_loss']:.4f}"
            + (f", val accuracy {row['val_accuracy']:.4f}" if classes else f", val mse {row['val_mse']:.5f}")
            + f", {row['positions_per_second']:,.0f} positions/s"
        )
        if val.get("loss", float("inf")) < best_loss:
            best_loss, bad = val["loss"], 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
        stopped_early = bad >= cfg.patience
        _save(ckpt_path, model, opt, config, encoder, source, epoch, history, best_loss, best_state, bad, stopped_early)
        result.epochs_run += 1
        if stopped_early:
            log(f"early stop: no better validation loss for {cfg.patience} epochs")
            break
        if out_of_time or (cfg.max_minutes and time.monotonic() - t0 > cfg.max_minutes * 60):
            log(f"time budget of {cfg.max_minutes:g} min reached" + (" within the epoch" if out_of_time else ""))
            break
    if best_state is not None:
        model.load_state_dict(best_state)
    result.history = history
    result.test = evaluate(model, test_b, encoder, device, classes, cp_unit, cfg.amp)
    result.positions_per_second = seen / train_seconds if train_seconds else 0.0
    return result


def _save(
    path: Path, model, opt, config, encoder, source, epoch, history, best_loss, best_state, bad, stopped_early
) -> None:
    state = {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "config": config,
        "encoder": {"name": encoder.name, "version": encoder.version},
        "dataset": source,
        "epoch": epoch,
        "history": history,
        "best_val_loss": best_loss,
        "best_model": best_state,
        "bad_epochs": bad,
        "stopped_early": stopped_early,
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_model(path: Path, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The best model of a checkpoint, and the checkpoint (config, encoder, lineage, history)."""
    ck = torch.load(path, map_location=device, weights_only=False)
    cfg = ck["config"]
    preset = PRESETS[cfg["model"]]
    if cfg.get("hidden"):
        preset = dataclasses.replace(preset, hidden=tuple(cfg["hidden"]))
    encoder = get_encoder(ck["encoder"]["name"])
    if encoder.version != ck["encoder"]["version"]:
        raise ValueError(
            f"{path}: trained with {encoder.name} v{ck['encoder']['version']}, this code has v{encoder.version}"
        )
    classes = DATASETS[cfg["dataset"]].classes
    model = build_model(preset, encoder.shape, classes or 1)
    model.load_state_dict(ck["best_model"] or ck["model"])
    model.eval()
    return model, ck


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m training.train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    choices = config_choices(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        default = f.default
        if f.name == "hidden":
            ap.add_argument("--hidden", type=int, nargs="*", default=[])
        elif isinstance(default, bool):
            ap.add_argument(f"--{f.name.replace('_', '-')}", action=argparse.BooleanOptionalAction, default=default)
        else:
            ap.add_argument(
                f"--{f.name.replace('_', '-')}", type=type(default), default=default, choices=choices.get(f.name)
            )
    args = vars(ap.parse_args(argv))
    args["hidden"] = tuple(args["hidden"])
    r = train(TrainConfig(**args))
    test = r.test
    summary = (
        f"test accuracy {test['accuracy']:.4f} (majority class {test['majority_class_accuracy']:.4f})"
        if "accuracy" in test
        else f"test mse {test.get('mse', float('nan')):.5f}, cp mae {test.get('cp_mae', float('nan')):.1f}"
    )
    print(f"{summary} on {test.get('rows', 0):,} positions; checkpoint {r.checkpoint}")


if __name__ == "__main__":
    main()
