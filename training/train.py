"""Training loop: one dataset split, one encoder, one model preset; runs without Dagster.

    python -m training.train --store ./store --dataset sabatelli_3class --model mlp3 \\
        --encoder bitmap768 --epochs 5 --out ./runs/mlp3

Early stopping on validation loss; a checkpoint (model, optimizer, config, encoder name and
version, dataset lineage, history) after every epoch; a run pointed at an existing
checkpoint of the same configuration resumes after its last epoch. Each epoch seeds its own
shuffling and dropout from (seed, epoch), so a resumed run ends with the same weights as an
uninterrupted one. An epoch the time bound (max_minutes) cut short is scored and kept like any
other, and its checkpoint also holds the state it began from: a resumed run does that epoch again,
whole. (A pretraining its share of the bound cut is kept as it is: a resumed run goes on from it.)
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import pyarrow.parquet as pq
import torch
from torch import nn

from pipeline.datasets.datasets import DATASETS, SPLITS, built_with, dataset_dir
from pipeline.settings import add_arguments, from_namespace
from pipeline.store import storage
from pipeline.store.storage_paths import ObjectPath, StorePath
from pipeline.store.store import Store, default_root
from pipeline.store.store_files import atomic_path
from training.autoencoder import PretrainConfig, encoded_inputs
from training.baselines import baselines_of, targets_and_material
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
from training.choices import EARLY_STOPPING, EPOCHS_DONE, TIME_BUDGET, KeepBy, Stop, check_choice
from training.config import TrainConfig, config_choices  # re-exported: callers import them from here
from training.data import LoaderConfig, ParquetBatches
from training.encoders import file_mirrorable, get_encoder, mirror_files
from training.models import PRESETS, ModelSpec, OptimizerName, build_model

PRETRAIN_SHARE = 0.5
"""The share of max_minutes a model's unsupervised pretraining may take (each layer an equal
part of it, training.autoencoder.pretrain_stack); the supervised epochs get the rest."""


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
    epochs_asked: int = 0
    """The most epochs the run was given (TrainConfig.epochs); `history` holds those done."""
    max_minutes: float = 0.0
    """The run's wall-time bound in minutes (0: none); pretraining had PRETRAIN_SHARE of it."""
    stopped_by: Stop | Literal[""] = ""
    """Why training ended (training.choices.Stop; empty: not run): `epochs` (every epoch asked
    for ran), `early stopping`, or `time budget` (max_minutes reached: fewer epochs than asked,
    or the last one cut short)."""
    pretrain_epochs_asked: int = 0
    """Pretraining epochs asked for each layer (0: none); `pretrain` holds those done."""
    keep_by: KeepBy = "loss"
    """The validation figure that kept the best epoch and stopped the run early (the preset's)."""

    def pretrain_done(self) -> list[int]:
        """Pretraining epochs done, per layer (layer order)."""
        layers = sorted({r["layer"] for r in self.pretrain})
        return [sum(1 for r in self.pretrain if r["layer"] == k) for k in layers]

    def pretrain_cut(self) -> bool:
        """Whether pretraining's time share cut it: a layer's epoch ended early (its row `cut`,
        the last epoch asked for too) or a layer did fewer epochs than asked for."""
        return any(r.get("cut") for r in self.pretrain) or any(
            done < self.pretrain_epochs_asked for done in self.pretrain_done()
        )

    def stop_text(self) -> str:
        """Where training stopped and why, in words (what a time budget cut, stated)."""
        done, asked = len(self.history), self.epochs_asked
        why = {
            TIME_BUDGET: f"stopped by the time budget ({self.max_minutes:g} min)",
            EARLY_STOPPING: f"stopped early (no better validation {self.keep_by})",
            EPOCHS_DONE: "every epoch asked for",
        }.get(self.stopped_by, self.stopped_by or "not run")
        text = f"{done} of {asked} epoch(s), {why}"
        if self.history and self.history[-1].get("cut"):  # a resumed run does this one again, whole
            text += f", the {_ordinal(done)} cut short by the bound"
        if self.pretrain:
            layers = ", ".join(map(str, self.pretrain_done()))
            share = self.max_minutes * PRETRAIN_SHARE
            text += f"; pretraining {layers} of {self.pretrain_epochs_asked} epoch(s) per layer" + (
                f", cut by its time share ({share:g} min)" if self.pretrain_cut() else ""
            )
        return text

    def stop_metadata(self) -> dict:
        """The schedule and where it stopped, for a model asset's metadata (plain values)."""
        return {
            "epochs_asked": self.epochs_asked,
            "max_minutes": self.max_minutes,
            "stopped_by": self.stopped_by,
            "stopped_by_time_budget": self.stopped_by == TIME_BUDGET or self.pretrain_cut(),
            "training_stop": self.stop_text(),
        }

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


def _ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def split_batches(preset: ModelSpec, split: str = "val"):
    """How a preset reads a split file: pairs of positions drawn inside it for a siamese
    comparator (training.deepchess.PairBatches: train's in the preset's pair order, val's and
    test's by the winner), else rows (ParquetBatches); same arguments."""
    if preset.kind == "siamese":
        from training.deepchess import PairBatches

        return functools.partial(PairBatches, order=preset.pair_order if split == "train" else "winner")
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


def baseline_leads(rows: dict, dataset: str, majority: int, games=None) -> dict:
    """The model's lead over the majority class and over the material rule (training.baselines)
    on the same test rows, each with the half-width of its 95% interval, clustered by game where
    `games` (N,) gives each row's game (paired_lead); `lead_clusters`: how many games, 0 when
    there is no game grouping (no `games`, or not one per test row): the interval is then per row.

    `rows`: the per-row outcome of the pass that scored the model (training.checkpoints.evaluate's
    `per_row`: target, prediction, material), so the split is neither read nor run again."""
    from training.baselines import material_predictions

    y = np.asarray(rows.get("target", ())).astype(np.int64)
    if not len(y):
        return {}
    ok = np.asarray(rows["prediction"]).astype(np.int64) == y
    clusters = games if games is not None and len(games) == len(ok) else None
    out = {"lead_clusters": float(len(np.unique(clusters))) if clusters is not None else 0.0}  # 0: per row
    out["majority_lead"], out["majority_lead_ci95"] = paired_lead(ok, y == majority, clusters)
    by_material = material_predictions(dataset, np.asarray(rows["material"], dtype=np.float32))
    if by_material is not None:
        out["material_lead"], out["material_lead_ci95"] = paired_lead(ok, by_material == y, clusters)
    return out


def line_lead(rows: dict, intercept: float, slope: float, games=None) -> dict:
    """A regression model's lead over the material line (training.baselines: fitted on train) on
    the same test rows: the line's squared error less the model's, row by row, its mean
    (`material_line_lead`, in the target's units squared: the line's MSE less the model's) with
    the half-width of its 95% interval clustered by game where `games` gives each row's game
    (paired_lead; `lead_clusters` as baseline_leads gives it); `rows` as baseline_leads takes them."""
    y = np.asarray(rows.get("target", ()), dtype=np.float64)
    if not len(y):
        return {}
    ours = (np.asarray(rows["prediction"], dtype=np.float64) - y) ** 2
    line = (intercept + slope * np.asarray(rows["material"], dtype=np.float64) - y) ** 2
    clusters = games if games is not None and len(games) == len(y) else None
    lead, ci95 = paired_lead(line, ours, clusters)
    grouped = float(len(np.unique(clusters))) if clusters is not None else 0.0  # 0: per row
    return {"material_line_lead": lead, "material_line_lead_ci95": ci95, "lead_clusters": grouped}


def figures_on_test(
    model: nn.Module,
    test: ParquetBatches,
    fitted_on: tuple[np.ndarray, np.ndarray],
    encoder,
    device,
    dataset: str,
    cp_unit: float,
    amp: bool,
    games: np.ndarray | None = None,
    rows: dict | None = None,
) -> dict:
    """A row model's test figures in one pass over test (training.checkpoints.evaluate keeping
    each row's target, prediction and material): its metrics, the baselines scored on the same
    rows (training.baselines; `fitted_on`, train's targets and material as train_baseline_rows
    reads them, gives the majority class or material line) and, for a class target, its leads
    over them with their intervals (baseline_leads, clustered by `games`). `rows`: a dict that
    gains those per-row arrays (training.held_out's intervals of the metric)."""
    classes = DATASETS[dataset].classes
    rows = {} if rows is None else rows
    out = evaluate(model, test, encoder, device, classes, cp_unit, amp, per_row=rows)
    y_train, m_train = fitted_on
    out.update(baselines_of(dataset, classes, y_train, m_train, rows["target"], rows["material"], cp_unit))
    if classes and "majority_class" in out:  # the leads, with their intervals (clustered by game)
        out.update(baseline_leads(rows, dataset, int(out["majority_class"]), games))
    elif not classes and "material_baseline_slope" in out:
        out.update(line_lead(rows, out["material_baseline_intercept"], out["material_baseline_slope"], games))
    return out


def train_baseline_rows(train: ParquetBatches, dataset: str) -> tuple[np.ndarray, np.ndarray]:
    """Train's targets, and its material where the baseline is a fitted line (a regression
    target; a class rule is fixed): what figures_on_test fits its baselines on, read once."""
    return targets_and_material(train.epoch(0), with_material=not DATASETS[dataset].classes)


def target_cp_unit(dataset: str, target: str, params: dict) -> float:
    """Centipawns per unit of the target the run learns, for the cp mean absolute error
    (CP_PER_UNIT; a set built with another clip_cp spans twice that); 0 where the target is not
    linear in centipawns (another column, or the win probability)."""
    if target != "target" or params.get("target_kind", "linear") != "linear":
        return 0.0
    return 2.0 * params["clip_cp"] if "clip_cp" in params else CP_PER_UNIT.get(dataset, 1.0)


def _games(path: Path, rows: int, target: str) -> np.ndarray | None:
    """The game of each of the first `rows` rows of a split file, in the order an unshuffled
    loader reads them; None when the file has no game_id or the target leaves rows out."""
    if target != "target" or "game_id" not in pq.read_schema(path).names:
        return None
    return pq.read_table(path, columns=["game_id"]).column(0).to_numpy()[:rows]


def train(cfg: TrainConfig, log=print, preset: ModelSpec | None = None) -> TrainResult:
    """Train cfg's model on cfg's dataset. `preset`: a ModelSpec in place of cfg.model's named
    one (the hook of a study's variant, scripts/material_study.py: one that no preset is). The
    checkpoint's config records the spec trained (either kind), so a run resumes only a checkpoint
    of the same spec and the checkpoint loads as trained after its preset changes."""
    cfg.check()  # again: a field may have been set after the config was made
    spec = DATASETS[cfg.dataset]
    custom = preset is not None
    preset = preset if custom else PRESETS[cfg.model]
    if cfg.hidden:
        preset = dataclasses.replace(preset, hidden=tuple(cfg.hidden))
    lr = cfg.lr or preset.lr
    if preset.keep_by == "accuracy" and not spec.classes:
        raise ValueError(f"{cfg.dataset} has a regression target: keep its epochs by loss, not accuracy")
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
    # The files this run reads (once), how their rows are oriented (players need it),
    # and the parameters it was built with (the players map a regression target back by them).
    source = {
        "name": cfg.dataset,
        "splits": lineage(folder, files),
        "pov": rows_pov(files["train"]),
        "params": built_with(files["train"]).get("params", {}),
    }
    loader = LoaderConfig(batch_size=cfg.batch_size, shuffle_buffer=cfg.shuffle_buffer)
    evaluation = LoaderConfig(batch_size=4096, shuffle=False)
    batches = split_batches(preset)  # rows, or pairs of rows drawn inside each split
    train_b = split_batches(preset, "train")(
        files["train"], loader, seed=cfg.seed, limit=cfg.max_train_rows, target=cfg.target
    )
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
    config["preset"] = asdict(preset)  # the spec itself: a preset changed later neither loads nor resumes it wrongly
    history: list[dict] = []
    pretrained: list[dict] = []
    start_epoch, best_loss, best_state, bad = 0, float("inf"), None, 0
    result = TrainResult(
        ckpt_path,
        device=str(device),
        rows={"train": train_b.rows, "val": val_b.rows, "test": test_b.rows},
        epochs_asked=cfg.epochs,
        max_minutes=cfg.max_minutes,
        keep_by=preset.keep_by,
    )
    stopped_by: Stop | Literal[""] = ""
    redo = False  # resumed from the start of an epoch the bound cut
    if storage.exists(ckpt_path):
        ck = load_checkpoint(ckpt_path, map_location=device)
        if _same_run(ck["config"], config) and ck["encoder"] == {"name": encoder.name, "version": encoder.version}:
            if ck.get("resume"):  # the bound cut its last epoch: go on from where that epoch began
                log(
                    f"epoch {ck['epoch']} of {ckpt_path} was cut by the time bound: it is done again, whole "
                    "(a bound shorter than an epoch cuts it again)"
                )
                ck, redo = {**ck, **ck["resume"]}, True
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            history, best_loss, bad = ck["history"], ck["best_val_loss"], ck["bad_epochs"]
            pretrained = ck.get("pretrain", [])
            best_state = ck["best_model"]
            start_epoch = result.resumed_from = ck["epoch"] + 1
            log(f"resuming from {ckpt_path} after epoch {ck['epoch']}")
            if ck.get("stopped_early"):
                start_epoch, stopped_by = cfg.epochs, EARLY_STOPPING
        else:
            log(f"{ckpt_path} holds another configuration: starting afresh")
    weight = None
    if classes and preset.class_weight:  # each class by its inverse frequency in train
        counts = np.bincount(targets_and_material(train_b.epoch(0), False)[0].astype(np.int64), minlength=classes)
        weight = torch.tensor(counts.sum() / (classes * counts), dtype=torch.float32, device=device)
    loss_fn = nn.CrossEntropyLoss(weight=weight) if classes else nn.MSELoss()
    cp_unit = target_cp_unit(cfg.dataset, cfg.target, source["params"])
    t0 = time.monotonic()
    pretrain_epochs = cfg.epochs if cfg.pretrain_epochs < 0 else cfg.pretrain_epochs
    result.pretrain_epochs_asked = pretrain_epochs if hasattr(model, "pretrain") else 0
    if hasattr(model, "pretrain") and start_epoch == 0 and pretrain_epochs and not pretrained:
        # Unsupervised phase (training.autoencoder.Pretrainable) on single positions of train,
        # within its share of the time bound (PRETRAIN_SHARE), counted from the same start t0.
        singles = lambda b: getattr(b, "positions", b)  # noqa: E731  (a pair loader's positions)
        pretrained = model.pretrain(
            encoded_inputs(singles(train_b), encoder, device),
            encoded_inputs(singles(val_b), encoder, device),
            PretrainConfig(
                pretrain_epochs, preset.pretrain_lr, preset.lr_decay, cfg.max_minutes * PRETRAIN_SHARE, cfg.seed
            ),
            device,
            log,
        )
    seen, train_seconds = 0, 0.0
    stopped_early = False
    for epoch in range(start_epoch, cfg.epochs):
        # Under a bound, the state this epoch begins from: a checkpoint of an epoch the bound cuts
        # keeps it, so that a resumed run does the whole epoch (the same weights as an unbounded run).
        began = _resume_point(model, opt, epoch, history, best_loss, best_state, bad) if cfg.max_minutes else None
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
        if out_of_time and not n:  # the bound was reached before this epoch's first step: nothing to record
            stopped_by = TIME_BUDGET
            log(f"time budget of {cfg.max_minutes:g} min reached before epoch {epoch}")
            break
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
            "positions": n,
            "cut": out_of_time,  # the bound ended it within: fewer positions than an epoch
        }
        history.append(row)
        log(
            f"epoch {epoch}: train loss {row['train_loss']:.4f}, val loss {row['val_loss']:.4f}"
            + (f", val accuracy {row['val_accuracy']:.4f}" if classes else f", val mse {row['val_mse']:.5f}")
            + f", {row['positions_per_second']:,.0f} positions/s"
        )
        # the figure that keeps an epoch, lower is better: the loss, or the accuracy negated
        kept = -val["accuracy"] if preset.keep_by == "accuracy" else val.get("loss", float("inf"))
        if kept < best_loss:
            best_loss, bad = kept, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
        stopped_early = bad >= cfg.patience and not out_of_time  # a cut epoch is redone on resume, never final
        state = (model, opt, config, encoder, source, epoch, history, best_loss, best_state, bad, stopped_early)
        _save(ckpt_path, *state, pretrained, resume=began if out_of_time else None)
        result.epochs_run += 1
        if stopped_early:
            stopped_by = EARLY_STOPPING
            log(f"early stop: no better validation {preset.keep_by} for {cfg.patience} epochs")
            break
        if out_of_time or (cfg.max_minutes and time.monotonic() - t0 > cfg.max_minutes * 60):
            stopped_by = TIME_BUDGET if out_of_time or epoch + 1 < cfg.epochs else EPOCHS_DONE
            log(f"time budget of {cfg.max_minutes:g} min reached" + (" within the epoch" if out_of_time else ""))
            break
    result.stopped_by = stopped_by or EPOCHS_DONE
    if not result.epochs_run and (start_epoch == 0 or redo):
        # No epoch finished (the bound was spent first, or a resume from a cut epoch had no epoch
        # left to do): the checkpoint holds the model this run scores (pretrained, where it has a
        # pretraining) and says so, never an older run's or the cut epoch's.
        state = (model, opt, config, encoder, source, start_epoch - 1, history, best_loss, best_state, bad, False)
        _save(ckpt_path, *state, pretrained)
    if best_state is not None:
        model.load_state_dict(best_state)
    result.history = history
    result.pretrain = pretrained
    if preset.kind != "siamese":  # the majority class and material on the same test rows, in the same pass
        games = _games(files["test"], test_b.rows, cfg.target)  # the leads' intervals cluster by game
        fitted_on = train_baseline_rows(train_b, cfg.dataset)
        result.test = figures_on_test(model, test_b, fitted_on, encoder, device, cfg.dataset, cp_unit, cfg.amp, games)
    else:  # pairs: their own baseline
        from training.deepchess import PairScores, pair_baselines

        per_row: dict = {}  # each test pair scored, in the pass that gives the accuracy
        result.test = evaluate(model, test_b, encoder, device, classes, cp_unit, cfg.amp, per_row)
        # the baseline fitted on train's pairs by the winner, whatever order the model's were in
        result.test.update(pair_baselines(train_b.by_winner(), test_b, PairScores.from_rows(per_row, test_b)))
    result.positions_per_second = seen / train_seconds if train_seconds else 0.0
    return result


def _resume_point(model, opt, epoch, history, best_loss, best_state, bad) -> dict:
    """The state an epoch begins from, in a checkpoint's fields (a copy: training goes on from it)."""
    return {
        "model": copy.deepcopy(model.state_dict()),
        "optimizer": copy.deepcopy(opt.state_dict()),
        "epoch": epoch - 1,
        "history": list(history),
        "best_val_loss": best_loss,
        "best_model": best_state,  # replaced, never changed in place, when a better epoch comes
        "bad_epochs": bad,
        "stopped_early": False,
    }


def _save(
    path,
    model,
    opt,
    config,
    encoder,
    source,
    epoch,
    history,
    best_loss,
    best_state,
    bad,
    stopped_early,
    pre=(),
    resume: dict | None = None,
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
        "resume": resume,  # the bound cut this epoch: the state it began from (_resume_point), else None
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m training.train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(ap, TrainConfig, choices=config_choices(TrainConfig))
    try:
        cfg = from_namespace(TrainConfig, ap.parse_args(argv))
    except ValueError as e:  # a value TrainConfig.check refuses (max_minutes): one line, no traceback
        ap.error(str(e))
    r = train(cfg)
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
    if "material_line_lead" in test:  # the line's MSE less ours, and its 95% interval (clustered by game)
        summary += f", lead over the line {test['material_line_lead']:+.5f} +/- {test['material_line_lead_ci95']:.5f}"
    print(f"{summary} on {test.get('rows', 0):,} positions; checkpoint {r.checkpoint}")


if __name__ == "__main__":
    main()
