"""A trained model: its checkpoint's place in the store, loading it, the device it runs on, and
its loss and metrics on a dataset split.

Below the training loop (training.train) and the modules that use finished models
(training.evaluator, training.deepchess, training.piece_values), so that none of them imports
the loop: training.train imports deepchess (pair loading, the pair baseline), and deepchess and
piece_values load checkpoints; training.models holds every architecture a checkpoint names.
The loop re-exports what its callers import from it (load_model, resolve_device, store_location).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import get_args

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch
from torch import nn

from pipeline.datasets.datasets import DATASETS, Pov
from pipeline.store import storage
from pipeline.store.storage_paths import ObjectPath, StorePath
from training.baselines import material
from training.choices import Device, check_choice
from training.data import ParquetBatches
from training.encoders import get_encoder
from training.models import PRESETS, ModelSpec, build_model

CP_PER_UNIT = {
    **{name: 2 * spec.defaults["clip_cp"] for name, spec in DATASETS.items() if "clip_cp" in spec.defaults},
    "piece_values": 100,
}
"""Centipawns per unit of a regression target (for the cp mean absolute error): the clipped
linear map's span (sabatelli_regression and its searched set), and pawns."""


def resolve_device(name: Device) -> torch.device:
    check_choice("device", name, get_args(Device))
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device cuda asked for, but torch sees no CUDA device")
    return torch.device(name)


def store_location(path: StorePath | str) -> StorePath:
    """A file's place in a store (a checkpoint, a dataset split of a lineage) from what names it:
    a Path, an ObjectPath, or text (a file, or an s3:// URI as the model assets record it). A URI
    that went through Path() ("s3:/bucket/key") is read as the URI it was, unless such a local
    file exists."""
    if isinstance(path, ObjectPath):
        return path
    text = str(path)
    if text.startswith("s3:/") and not text.startswith("s3://") and not Path(text).exists():
        text = "s3://" + text[len("s3:/") :]
    return storage.parse_root(text) if "://" in text else Path(text)


def load_checkpoint(path: StorePath | str, map_location="cpu") -> dict:
    """torch.load of a checkpoint in the store (an S3 one is read from a downloaded copy)."""
    where = store_location(path)
    if isinstance(where, ObjectPath):
        with storage.local_copy(where) as tmp:
            return torch.load(tmp, map_location=map_location, weights_only=False)
    return torch.load(where, map_location=map_location, weights_only=False)


def rows_pov(train: Path) -> Pov:
    """'side_to_move' when the rows mirror Black-to-move positions (Sabatelli's datasets), else 'white'."""
    if "mirrored" not in pq.read_schema(train).names:
        return "white"
    return "side_to_move" if pc.any(pq.read_table(train, columns=["mirrored"])["mirrored"]).as_py() else "white"


def model_spec(fields: dict) -> ModelSpec:
    """A ModelSpec from its fields as a checkpoint records them (asdict; lists where tuples were)."""
    tuples = {
        k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
        for k, v in fields.items()
        if isinstance(v, list | tuple)
    }
    return ModelSpec(**{**fields, **tuples})


def load_model(path: StorePath | str, device: str = "cpu") -> tuple[nn.Module, dict]:
    """The best model of a checkpoint (a file, or an object of an S3 store), and the checkpoint
    (config, encoder, lineage, history)."""
    ck = load_checkpoint(path, map_location=device)
    cfg = ck["config"]
    state = ck["best_model"] or ck["model"]
    if cfg.get("preset"):  # the spec trained, as the run recorded it
        preset = model_spec(cfg["preset"])
    else:  # a checkpoint from before runs recorded their spec: the named preset as it is now
        preset = PRESETS[cfg["model"]]
        if cfg.get("hidden"):
            preset = dataclasses.replace(preset, hidden=tuple(cfg["hidden"]))
        elif preset.kind == "mlp" and not preset.count_logits:  # its widths may have changed since
            linear = [tuple(t.shape) for k, t in state.items() if k.startswith("net.") and k.endswith(".weight")]
            preset = dataclasses.replace(preset, hidden=tuple(s[0] for s in linear if len(s) == 2)[:-1])
    encoder = get_encoder(ck["encoder"]["name"])
    if encoder.version != ck["encoder"]["version"]:
        raise ValueError(
            f"{path}: trained with {encoder.name} v{ck['encoder']['version']}, this code has v{encoder.version}"
        )
    classes = DATASETS[cfg["dataset"]].classes
    model = build_model(preset, encoder.shape, classes or 1)
    model.load_state_dict(state)
    model.eval()
    return model, ck


def evaluate(
    model: nn.Module,
    batches: ParquetBatches,
    encoder,
    device,
    classes: int,
    cp_per_unit: float,
    amp: bool,
    per_row: dict | None = None,
) -> dict:
    """Loss and the metrics of a split: accuracy, confusion matrix, per-class accuracy (classes),
    or MSE, MAE and cp MAE (regression).

    `per_row`: a dict that gains, in the loader's order, each row's `target`, the model's
    `prediction` (its class, or its value) and the row's `material` balance in pawns
    (training.baselines.material): the same pass then gives what the baselines and the model's
    leads over them are scored on (training.train.figures_on_test), with no second read of the split."""
    model.eval()
    total, loss_sum, correct, abs_sum = 0, 0.0, 0, 0.0
    kept: dict[str, list[np.ndarray]] = {"target": [], "prediction": [], "material": []}
    confusion = np.zeros((classes, classes), dtype=np.int64) if classes else None
    with torch.no_grad(), autocast(device, amp):
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
            if per_row is not None:  # float32: numpy takes no bfloat16 (what autocast on CUDA gives)
                with torch.autocast(device.type, enabled=False):
                    mat = material(batch).float()  # exact pawns, never in bfloat16
                # copies, as training.baselines.targets_and_material keeps them (a view holds its tensor)
                kept["target"].append(y.float().cpu().numpy().copy())
                kept["prediction"].append((pred if classes else p.float()).cpu().numpy().copy())
                kept["material"].append(mat.cpu().numpy().copy())
            total += len(y)
    if per_row is not None:
        per_row.update({k: np.concatenate(v) if v else np.zeros(0, np.float32) for k, v in kept.items()})
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
        if cp_per_unit:
            m["cp_mae"] = m["mae"] * cp_per_unit
    return m


def autocast(device: torch.device, amp: bool):
    """bfloat16 autocast on CUDA when amp is on; else a context that changes nothing."""
    if device.type == "cuda" and amp:
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)
