"""Baselines a model is scored against, on the same test rows: the majority class and material.

A network that scores little above these has learnt little beyond counting pieces. Both are
fitted on train only (the majority class; the material line of a regression target) and scored
on the rows of the test split that the model itself is scored on (the same loader, so the same
`max_eval_rows` cut and the same rows a `target` other than `target` leaves out).

Material is counted in pawns (P 1, N 3, B 3, R 5, Q 9, as the SQL macro `material`) from the
orientation the encoder gives the network: the side to move's view for mirrored rows
(Sabatelli's sets), White's otherwise. The material rule of a class target is the dataset's
own class of `100 x material` centipawns, taken from the same SQL macro the dataset's target
comes from (sql/views/macros.sql): for 3 classes, win or loss when the material is at least 2
pawns apart (beyond +/-1.5), else draw. A regression target gets the least-squares line
`target = a + b x material` fitted on train, and the train mean as its "majority class".
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

import numpy as np
import torch

from pipeline.datasets.datasets import DATASETS, classes_of
from training.encoders import Batch, material_balance, oriented

MATERIAL_RANGE = 39
"""Largest material balance in pawns (8 + 2 x 3 + 2 x 3 + 2 x 5 + 9), before promotions."""
CLASS_MACROS = {name: spec.class_macro for name, spec in DATASETS.items() if spec.class_macro}
"""Datasets with a material rule, and the macro of sql/views/macros.sql mapping a score in
centipawns onto their classes (DatasetSpec.class_macro: the material rule classifies 100 x
material with it)."""


def material(batch: Batch) -> torch.Tensor:
    """(B,) material balance in pawns, from the encoder's orientation (side to move when mirrored)."""
    return material_balance(oriented(batch)[0])


@cache
def material_classes(dataset: str) -> dict[int, int] | None:
    """{material in pawns: class} of a class dataset's material rule, or None when it has none."""
    macro = CLASS_MACROS.get(dataset)
    if macro is None:
        return None
    pawns = np.arange(-4 * MATERIAL_RANGE, 4 * MATERIAL_RANGE + 1)
    return dict(zip(pawns.tolist(), classes_of(macro, 100 * pawns).tolist(), strict=True))


def targets_and_material(batches: Iterable[Batch], with_material: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Every row's target and (with_material) material balance, in the loader's order."""
    ys, ms = [np.zeros(0, np.float32)], [np.zeros(0, np.float32)]
    for b in batches:
        # copies: a numpy view keeps its tensor's allocation, and a batch's many small ones
        # held ~0.7 KB a row between the loader's large ones (10 GB over 5.9M rows)
        ys.append(b.target.cpu().numpy().copy())
        if with_material:
            ms.append(material(b).cpu().numpy().copy())
    return np.concatenate(ys), np.concatenate(ms)


def material_predictions(dataset: str, balance: np.ndarray) -> np.ndarray | None:
    """The material rule's class for each material balance in `balance` (pawn units, rounded and
    clipped to the rule's table); None when the dataset has no material rule (material_classes)."""
    rule = material_classes(dataset)
    if rule is None:
        return None
    d = np.clip(np.rint(np.asarray(balance)).astype(np.int64), -4 * MATERIAL_RANGE, 4 * MATERIAL_RANGE)
    return np.vectorize(rule.__getitem__, otypes=[np.int64])(d)


def baselines(
    dataset: str, classes: int, train: Iterable[Batch], test: Iterable[Batch], cp_per_unit: float = 0.0
) -> dict:
    """The baselines' test figures, keyed as the model's own are (test metrics):

    classes: majority_class (train's most frequent class), majority_class_accuracy and, where
    the dataset has a material rule, material_baseline_accuracy;
    regression: mean_baseline_mse / _mae (train's mean), material_baseline_mse / _mae and the
    fitted line's material_baseline_intercept / _slope (+ _cp_mae when the target is in
    centipawn units: cp_per_unit)."""
    y_train, m_train = targets_and_material(train, with_material=not classes)  # a class rule is fixed
    return baselines_of(dataset, classes, y_train, m_train, *targets_and_material(test), cp_per_unit)


def baselines_of(
    dataset: str,
    classes: int,
    y_train: np.ndarray,
    m_train: np.ndarray,
    y_test: np.ndarray,
    m_test: np.ndarray,
    cp_per_unit: float = 0.0,
) -> dict:
    """`baselines` from the rows' targets and material balances (targets_and_material, or the
    per-row outcome of training.checkpoints.evaluate's pass over test); m_train is unused for
    a class target."""
    out: dict = {}
    if not len(y_test) or not len(y_train):
        return out
    if classes:
        counts = np.bincount(y_train.astype(np.int64), minlength=classes)
        majority = int(counts.argmax())
        out["majority_class"] = majority
        out["majority_class_accuracy"] = float((y_test.astype(np.int64) == majority).mean())
        pred = material_predictions(dataset, m_test)
        if pred is not None:
            out["material_baseline_accuracy"] = float((pred == y_test.astype(np.int64)).mean())
        return out
    mean = float(y_train.mean())
    out["mean_baseline_mse"] = float(((y_test - mean) ** 2).mean())
    out["mean_baseline_mae"] = float(np.abs(y_test - mean).mean())
    x = np.stack([np.ones_like(m_train, dtype=np.float64), m_train.astype(np.float64)], 1)
    (a, b), *_ = np.linalg.lstsq(x, y_train.astype(np.float64), rcond=None)
    pred = a + b * m_test
    out["material_baseline_intercept"] = float(a)
    out["material_baseline_slope"] = float(b)
    out["material_baseline_mse"] = float(((y_test - pred) ** 2).mean())
    out["material_baseline_mae"] = float(np.abs(y_test - pred).mean())
    if cp_per_unit:
        out["material_baseline_cp_mae"] = out["material_baseline_mae"] * cp_per_unit
        out["mean_baseline_cp_mae"] = out["mean_baseline_mae"] * cp_per_unit
    return out


def baselines_table(test: dict) -> str:
    """A Markdown table of a run's test figures beside its baselines (test: TrainResult.test)."""
    rows = test.get("rows", 0)
    if "accuracy" in test:
        lines = [f"| on {rows:,} test positions | accuracy |", "|---|---|", f"| model | {test['accuracy']:.2%} |"]
        if "majority_class_accuracy" in test:
            cls = f" ({test['majority_class']:.0f})" if "majority_class" in test else ""
            lines.append(f"| majority class of train{cls} | {test['majority_class_accuracy']:.2%} |")
        if "material_baseline_accuracy" in test:
            lines.append(f"| material rule | {test['material_baseline_accuracy']:.2%} |")
        return "\n".join(lines)
    cp = "cp_mae" in test
    head = f"| on {rows:,} test positions | MSE | MAE |" + (" cp MAE |" if cp else "")
    lines = [head, "|---|---|---|" + ("---|" if cp else "")]
    for label, prefix in (("model", ""), ("mean of train", "mean_baseline_"), ("material line", "material_baseline_")):
        if f"{prefix}mse" in test:
            lines.append(
                f"| {label} | {test[f'{prefix}mse']:.5f} | {test[f'{prefix}mae']:.4f} |"
                + (f" {test[f'{prefix}cp_mae']:.0f} |" if cp else "")
            )
    if "material_baseline_slope" in test:
        lines.append(
            f"\nmaterial line: target = {test['material_baseline_intercept']:.4f} "
            f"+ {test['material_baseline_slope']:.4f} x material (pawns), fitted on train"
        )
    return "\n".join(lines)
