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
import pyarrow.parquet as pq
import torch
from torch import nn

from pipeline import storage
from pipeline.datasets import DATASETS, SPLITS, dataset_dir
from pipeline.settings import add_arguments, from_namespace
from pipeline.storage import ObjectPath, StorePath
from pipeline.store import Store, atomic_path, default_root
from training.autoencoder import PretrainConfig, encoded_inputs
from training.baselines import baselines
from training.checkpoints import (
    CP_PER_UNIT,
    autocast,
    evaluate,
    load_checkpoint,
    resolve_device,
    rows_pov,
    store_location,
)
from training.checkpoints import load_model as load_model  # re-exported: callers load models from here
from training.choices import Device, check_choice
from training.data import LoaderConfig, ParquetBatches
from training.encoders import ENCODERS, file_mirrorable, get_encoder, mirror_files
from training.models import PRESETS, ModelSpec, OptimizerName, build_model

REGISTRIES = {"dataset": DATASETS, "model": PRESETS, "encoder": ENCODERS}
"""The TrainConfig fields that name an entry of a registry, and that registry."""


@dataclass
class TrainConfig:
    store: str = ""
    """Store root (a folder or s3://bucket/prefix) holding datasets/<dataset>/{train,val,test}.parquet;
    empty: $CHESS_PIPELINE_HOME, else ./store (the CLI's store), resolved when the run starts."""
    dataset: str = "sabatelli_3class"
    """Dataset name (sql/datasets/)."""
    model: str = "mlp3"
    """Model preset (training.models.PRESETS)."""
    encoder: str = "bitmap768"
    """Input encoder (training.encoders.ENCODERS)."""
    target: str = "target"
    """The dataset column the model learns (`target`; piece_values' `result_score` for the
    piece-value network's result variant); rows where another column is null are left out."""
    hidden: tuple[int, ...] = ()
    """Replace the preset's hidden widths (empty keeps them)."""
    epochs: int = 20
    """Most epochs; early stopping may end sooner."""
    patience: int = 3
    """Stop after this many epochs without a better validation loss."""
    pretrain_epochs: int = -1
    """Epochs of each layer's unsupervised pretraining, for a model that has one (DeepChess's
    Pos2Vec): -1 as many as `epochs`, 0 none. It gets at most half of max_minutes."""
    batch_size: int = 256
    """Rows per training step."""
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
    """Seed of the initial weights, the shuffling and dropout: the same seed gives the same model."""
    device: Device = "auto"
    """auto (CUDA when present, else CPU), cpu or cuda."""
    amp: bool = True
    """bfloat16 autocast on CUDA."""
    threads: int = 0
    """CPU threads (0: every core)."""
    out: str = ""
    """Folder for checkpoint.pt (or an s3://bucket/prefix); empty: <store>/models/<dataset>-<model>-<encoder>."""
    shuffle_buffer: int = 262_144
    """Rows shuffled together in memory (a larger buffer mixes more, costs more memory)."""

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
    checkpoint: StorePath
    history: list[dict] = field(default_factory=list)
    pretrain: list[dict] = field(default_factory=list)
    """Pretraining rows (training.autoencoder.pretrain_stack's history), if the model has one."""
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


def split_batches(preset: ModelSpec) -> type:
    """How a preset reads a split file: pairs of positions drawn inside it for a siamese
    comparator (training.deepchess.PairBatches), else rows (ParquetBatches); same arguments."""
    if preset.kind == "siamese":
        from training.deepchess import PairBatches

        return PairBatches
    return ParquetBatches


def lineage(folder: StorePath, files: dict[str, Path] | None = None) -> dict:
    """What a model is trained on: each split file of a dataset folder (a store path, local or
    s3://) with its size, rows and mtime; `files`: the local copies the rows are counted in."""
    out = {}
    for s in SPLITS:
        p = folder / f"{s}.parquet"
        local = (files or {}).get(s) or storage.local_file(p)
        if isinstance(p, ObjectPath):
            size, mtime = storage.size(p), storage.mtime_ns(p) / 1e9
        else:
            st = p.stat()
            size, mtime = st.st_size, st.st_mtime
        out[s] = {"path": str(p), "rows": pq.read_metadata(local).num_rows, "bytes": size, "mtime": mtime}
    return out


def _same_run(a: dict, b: dict) -> bool:
    """Whether a checkpoint's config continues this one (only the stopping rules may differ)."""
    loose = {"epochs", "patience", "max_minutes", "device", "threads", "out", "amp"}
    return {k: v for k, v in a.items() if k not in loose} == {k: v for k, v in b.items() if k not in loose}


def _optimizer(name: OptimizerName, params, lr: float, weight_decay: float = 0.0) -> torch.optim.Optimizer:
    check_choice("optimizer", name, get_args(OptimizerName))
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, nesterov=True, weight_decay=weight_decay)
    if weight_decay:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    return torch.optim.Adam(params, lr=lr)


def paired_lead(right: np.ndarray, other: np.ndarray, clusters: np.ndarray | None = None) -> tuple[float, float]:
    """(lead, half-width of its 95% interval) of one classifier over another scored on the same
    rows: `right` and `other` are (N,) bool, each row right or not. The lead is the difference of
    the two accuracies; its interval comes from the per-row differences (paired: the noise both
    share cancels), with a cluster-robust variance over `clusters` (N,) (a row's game: positions
    of one game are near copies with near the same label, so N rows are worth far fewer
    independent ones), or over single rows when None."""
    d = right.astype(np.float64) - other.astype(np.float64)
    n = len(d)
    if n < 2:
        return float(d.mean()) if n else 0.0, float("inf")
    lead = float(d.mean())
    keys = np.arange(n) if clusters is None else np.unique(clusters, return_inverse=True)[1]
    sums = np.bincount(keys, weights=d - lead)
    g = len(sums)
    if g < 2:
        return lead, float("inf")
    variance = (sums**2).sum() / n**2 * g / (g - 1)
    return lead, float(1.96 * variance**0.5)


def baseline_leads(
    model: nn.Module, batches: ParquetBatches, encoder, device, dataset: str, majority: int, amp: bool, games=None
) -> dict:
    """The model's lead over the majority class and over the material rule (training.baselines)
    on the same test rows, each with the half-width of its 95% interval, clustered by game where
    `games` (N,) gives each row's game (paired_lead); `lead_clusters`: how many games, 0 when
    there is no game grouping (no `games`, or not one per test row): the interval is then per row."""
    from training.baselines import material, material_classes, material_predictions

    rule = material_classes(dataset)
    model.eval()
    right, by_material, by_majority = [], [], []
    with torch.no_grad(), autocast(device, amp):
        for batch in batches.epoch(0):
            batch = batch.to(device)
            y = batch.target.long()
            right.append((model(encoder(batch)).float().argmax(1) == y).cpu().numpy())
            by_majority.append((y == majority).cpu().numpy())
            if rule is not None:
                pred = material_predictions(dataset, material(batch).float().cpu().numpy())
                by_material.append(pred == y.cpu().numpy())
    if not right:
        return {}
    ok = np.concatenate(right)
    clusters = games if games is not None and len(games) == len(ok) else None
    out = {"lead_clusters": float(len(np.unique(clusters))) if clusters is not None else 0.0}  # 0: per row
    out["majority_lead"], out["majority_lead_ci95"] = paired_lead(ok, np.concatenate(by_majority), clusters)
    if rule is not None:
        out["material_lead"], out["material_lead_ci95"] = paired_lead(ok, np.concatenate(by_material), clusters)
    return out


def _games(path: Path, rows: int, target: str) -> np.ndarray | None:
    """The game of each of the first `rows` rows of a split file, in the order an unshuffled
    loader reads them; None when the file has no game_id or the target leaves rows out."""
    if target != "target" or "game_id" not in pq.read_schema(path).names:
        return None
    return pq.read_table(path, columns=["game_id"]).column(0).to_numpy()[:rows]


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
    store = storage.parse_root(cfg.store) if cfg.store else default_root()  # a folder or s3://bucket/prefix
    cfg = dataclasses.replace(cfg, store=str(store))  # the checkpoint records the store used
    folder = dataset_dir(Store(store), cfg.dataset)
    if not storage.exists(folder / "train.parquet"):
        raise FileNotFoundError(
            f"{folder}/train.parquet not found: materialise the dataset first (chess-pipeline datasets {cfg.dataset})"
        )
    # The split files as local files: the store's own in a local store; from an S3 store, copies
    # in the local cache (storage.cached_copy), since the loader reads every row group once an
    # epoch and the baselines and pretraining read the files again.
    files = {s: storage.local_file(folder / f"{s}.parquet") for s in SPLITS}
    # The files this run reads (once), and how their rows are oriented (players need it).
    source = {"name": cfg.dataset, "splits": lineage(folder, files), "pov": rows_pov(files["train"])}
    loader = LoaderConfig(batch_size=cfg.batch_size, shuffle_buffer=cfg.shuffle_buffer)
    evaluation = LoaderConfig(batch_size=4096, shuffle=False)
    batches = split_batches(preset)  # rows, or pairs of rows drawn inside each split
    train_b = batches(files["train"], loader, seed=cfg.seed, limit=cfg.max_train_rows, target=cfg.target)
    val_b = batches(files["val"], evaluation, limit=cfg.max_eval_rows, target=cfg.target)
    test_b = batches(files["test"], evaluation, limit=cfg.max_eval_rows, target=cfg.target)
    for split, b in (("train", train_b), ("val", val_b), ("test", test_b)):
        if not b.rows:
            raise ValueError(f"{folder}/{split}.parquet has no rows: more games, or other split fractions")
    classes = spec.classes
    n_out = classes or 1
    torch.manual_seed(cfg.seed)
    model = build_model(preset, encoder.shape, n_out).to(device)
    opt = _optimizer(preset.optimizer, model.parameters(), lr, preset.weight_decay)
    out_dir = store_location(cfg.out) if cfg.out else store / "models" / f"{cfg.dataset}-{cfg.model}-{cfg.encoder}"
    ckpt_path = out_dir / "checkpoint.pt"
    config = asdict(cfg)
    config["hidden"] = list(cfg.hidden)
    history: list[dict] = []
    pretrained: list[dict] = []
    start_epoch, best_loss, best_state, bad = 0, float("inf"), None, 0
    result = TrainResult(
        ckpt_path, device=str(device), rows={"train": train_b.rows, "val": val_b.rows, "test": test_b.rows}
    )
    if storage.exists(ckpt_path):
        ck = load_checkpoint(ckpt_path, map_location=device)
        if _same_run(ck["config"], config) and ck["encoder"] == {"name": encoder.name, "version": encoder.version}:
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            history, best_loss, bad = ck["history"], ck["best_val_loss"], ck["bad_epochs"]
            pretrained = ck.get("pretrain", [])
            best_state = ck["best_model"]
            start_epoch = result.resumed_from = ck["epoch"] + 1
            log(f"resuming from {ckpt_path} after epoch {ck['epoch']}")
            if ck.get("stopped_early"):
                start_epoch = cfg.epochs
        else:
            log(f"{ckpt_path} holds another configuration: starting afresh")
    loss_fn = nn.CrossEntropyLoss() if classes else nn.MSELoss()
    cp_unit = CP_PER_UNIT.get(cfg.dataset, 1.0) if cfg.target == "target" else 0.0  # 0: not centipawns
    t0 = time.monotonic()
    pretrain_epochs = cfg.epochs if cfg.pretrain_epochs < 0 else cfg.pretrain_epochs
    if hasattr(model, "pretrain") and start_epoch == 0 and pretrain_epochs:
        # Unsupervised phase (training.autoencoder.Pretrainable) on single positions of train.
        singles = lambda b: getattr(b, "positions", b)  # noqa: E731  (a pair loader's positions)
        pretrained = model.pretrain(
            encoded_inputs(singles(train_b), encoder, device),
            encoded_inputs(singles(val_b), encoder, device),
            PretrainConfig(pretrain_epochs, preset.pretrain_lr, preset.lr_decay, cfg.max_minutes / 2, cfg.seed),
            device,
            log,
        )
    seen, train_seconds = 0, 0.0
    stopped_early = False
    for epoch in range(start_epoch, cfg.epochs):
        torch.manual_seed(cfg.seed * 1000 + epoch)  # dropout of this epoch, the same on resume
        for g in opt.param_groups:  # the preset's decay per epoch (1: constant)
            g["lr"] = lr * preset.lr_decay**epoch
        model.train()
        e0 = time.monotonic()
        loss_sum, n = 0.0, 0
        out_of_time = False
        for batch in train_b.epoch(epoch):
            if cfg.max_minutes and time.monotonic() - t0 > cfg.max_minutes * 60:
                out_of_time = True  # a short schedule: cut this epoch, evaluate, stop
                break
            batch = batch.to(device)
            if preset.mirror_files:  # half of the rows without castling rights, a <-> h (same value)
                flip = file_mirrorable(batch) & (torch.rand(len(batch.castling)) < 0.5).to(device)
                batch = mirror_files(batch, flip)
            with autocast(device, cfg.amp):
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
        state = (model, opt, config, encoder, source, epoch, history, best_loss, best_state, bad, stopped_early)
        _save(ckpt_path, *state, pretrained)
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
    result.pretrain = pretrained
    result.test = evaluate(model, test_b, encoder, device, classes, cp_unit, cfg.amp)
    if preset.kind != "siamese":  # the majority class and material on the same test rows (pairs: their own)
        result.test.update(baselines(cfg.dataset, classes, train_b.epoch(0), test_b.epoch(0), cp_unit))
        if classes and "majority_class" in result.test:  # the leads, with their intervals (clustered by game)
            games = _games(files["test"], test_b.rows, cfg.target)
            majority = int(result.test["majority_class"])
            result.test.update(baseline_leads(model, test_b, encoder, device, cfg.dataset, majority, cfg.amp, games))
    else:
        from training.deepchess import pair_baselines

        result.test.update(pair_baselines(train_b, test_b))
    result.positions_per_second = seen / train_seconds if train_seconds else 0.0
    return result


def _save(
    path, model, opt, config, encoder, source, epoch, history, best_loss, best_state, bad, stopped_early, pre=()
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
        "pretrain": list(pre),  # pretraining history
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m training.train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(ap, TrainConfig, choices=config_choices(TrainConfig))
    r = train(from_namespace(TrainConfig, ap.parse_args(argv)))
    test = r.test
    summary = (
        f"test accuracy {test['accuracy']:.4f} (majority class {test['majority_class_accuracy']:.4f}"
        + (f", material {test['material_baseline_accuracy']:.4f})" if "material_baseline_accuracy" in test else ")")
        if "accuracy" in test
        else f"test mse {test.get('mse', float('nan')):.5f} "
        f"(material line {test.get('material_baseline_mse', float('nan')):.5f}, "
        f"train mean {test.get('mean_baseline_mse', float('nan')):.5f}), cp mae {test.get('cp_mae', float('nan')):.1f}"
    )
    if "material_lead" in test:  # the lead over material, and its 95% interval (clustered by game)
        summary += f", lead over material {test['material_lead']:+.2%} +/- {test['material_lead_ci95']:.2%}"
    print(f"{summary} on {test.get('rows', 0):,} positions; checkpoint {r.checkpoint}")


if __name__ == "__main__":
    main()
