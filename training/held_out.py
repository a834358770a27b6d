"""A trained model on an archive it never saw, beside its own test split.

A model's test split is drawn from the games of the archives it trained on; a model that only
fits those archives scores there and nowhere else. This scores the model on the positions of
another store (built from archives the model's store does not hold: a later month, another
server) with the same dataset setting, and on its own test split, with the same figures:

- accuracy (a class target) or MSE (a regression target), each with its 95% interval, a
  bootstrap over games (a game's positions are not independent);
- the material baseline on the same rows (the material rule, or the line fitted on the model's
  own train split) and the model's lead over it, with its 95% interval clustered by game
  (training.train.figures_on_test, as the model's own test figures);
- whether the held-out figure lies inside the test split's interval, or beyond it for the better
  or the worse, and the difference with its 95% interval (difference: the two sets independent).

The held-out rows are built from the other store's games and labels with the model's own
dataset setting (its SQL parameters, as its checkpoint records them), every row of every game
(no split: the model trained on none of them), into a temporary folder: the other store is
read, never written. They are scored whole, and again less the positions the model's train and
val splits hold: the condition its test split meets (the leakage guard, sql/queries/split_guard.sql).
A searched set's model (sabatelli_regression_search) is held out on game rows: its base set
(DatasetSpec.sql, sabatelli_regression), what the searched set's val and test hold.

    chess-pipeline --home NEW ingest ARCHIVE && chess-pipeline --home NEW label --static
    python -m training.held_out --checkpoint STORE/models/.../checkpoint.pt --store NEW
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from pipeline.datasets.datasets import DATASETS, ROW_GROUP, SPLITS, SplitConfig, build_dataset, dataset_dir
from pipeline.research.intervals import MeanInterval, mean_interval
from pipeline.store import storage
from pipeline.store.store import Store
from training.checkpoints import load_model, store_location
from training.data import LoaderConfig, ParquetBatches
from training.encoders import get_encoder
from training.models import PRESETS
from training.train import figures_on_test, lineage, target_cp_unit, train_baseline_rows

EVALUATION = LoaderConfig(batch_size=4096, shuffle=False)


class HeldOutError(ValueError):
    """What keeps the comparison from being made, in one line with what to do."""


@dataclass(frozen=True)
class Figures:
    """One set of rows: the model's metric with its interval, material's, and the lead over it."""

    name: str
    classes: int
    """The target's classes (0: a regression target)."""
    rows: int
    games: int
    metric: MeanInterval
    """accuracy (a class target) or MSE, with its 95% interval (a bootstrap over games)."""
    material: float
    """The material baseline's figure on the same rows."""
    lead: float
    lead_ci95: float
    """The lead over material (accuracy points; the line's MSE less the model's) and its half-width."""


def held_out_dataset(trained_on: str) -> str:
    """The set a model is held out on: its own, or a searched set's base set (its game rows:
    what its val and test hold)."""
    spec = DATASETS[trained_on]
    return spec.sql if spec.search else trained_on


def build_held_out(store: str, trained_on: str, params: dict, out: Path, log=print) -> dict[str, Path]:
    """held_out_dataset's rows of every game of `store` (every split, no guard between them: they
    are all held out), built with the model's `params` into the store folder `out`."""
    name = held_out_dataset(trained_on)
    keep = {k: v for k, v in params.items() if k in DATASETS[name].defaults}
    source = Store(storage.parse_root(store))
    if not storage.exists(source.root / "games"):
        raise HeldOutError(f"no store at {store}: ingest the held-out archives there first (chess-pipeline ingest)")
    stats = build_dataset(source, name, keep, SplitConfig(guard=False), out=Store(out))
    if not stats.labelled:
        raise HeldOutError(f"the store at {store} gives no rows for {name}: {stats.empty_reason}")
    log(f"{store}: {stats.labelled:,} of {stats.candidates:,} candidate positions of {name} labelled")
    return {s: dataset_dir(Store(out), name) / f"{s}.parquet" for s in SPLITS}


def held_out_tables(new: dict[str, Path], seen: list[Path]) -> tuple[pa.Table, pa.Table]:
    """Every row of the held-out files in game order, and those rows less the ones whose
    position the `seen` files (the model's train and val) hold."""
    table = pa.concat_tables([pq.read_table(new[s]) for s in SPLITS]).combine_chunks()
    table = table.sort_by([("game_id", "ascending"), ("ply", "ascending")])
    keys = pa.concat_arrays([pq.read_table(p, columns=["position_key"]).column(0).combine_chunks() for p in seen])
    return table, table.filter(pc.invert(pc.is_in(table.column("position_key"), value_set=pc.unique(keys))))


def figures(name, model, path: Path, fitted_on, encoder, dataset: str, cp_unit: float) -> Figures:
    """The model's figures on one split file (read in file order: rows and games align)."""
    classes = DATASETS[dataset].classes
    batches = ParquetBatches(path, EVALUATION)
    games = pq.read_table(path, columns=["game_id"]).column(0).to_numpy()
    rows: dict = {}
    out = figures_on_test(model, batches, fitted_on, encoder, torch.device("cpu"), dataset, cp_unit, False, games, rows)
    y, p = rows["target"], rows["prediction"]
    per_row = (p == y).astype(np.float64) if classes else (p.astype(np.float64) - y) ** 2
    metric = mean_interval(per_row, clusters=games)
    if classes:
        material, lead, ci = out["material_baseline_accuracy"], out["material_lead"], out["material_lead_ci95"]
    else:
        material, lead, ci = out["material_baseline_mse"], out["material_line_lead"], out["material_line_lead_ci95"]
    return Figures(name, classes, len(y), len(np.unique(games)), metric, material, lead, ci)


def compare(checkpoint: str, store: str, log=print) -> list[Figures]:
    """The model of `checkpoint` on its own test split and on `store`'s games (build_held_out):
    all their rows, and those of the positions it never trained on."""
    model, ck = load_model(checkpoint)
    cfg = ck["config"]
    trained_on = cfg["dataset"]
    spec = DATASETS[trained_on]
    kind = cfg["preset"]["kind"] if cfg.get("preset") else PRESETS[cfg["model"]].kind
    if kind == "siamese" or cfg.get("target", "target") != "target":
        raise HeldOutError(f"{checkpoint}: a model of single positions and their `target` only")
    if spec.classes and not spec.class_macro:
        raise HeldOutError(f"{trained_on} has no material rule to compare with")
    folder = dataset_dir(Store(storage.parse_root(cfg["store"])), trained_on)
    if not storage.exists(folder / "train.parquet"):
        raise HeldOutError(f"{trained_on}, which this model trained on, is no longer in {cfg['store']}")
    own = {s: storage.local_file(folder / f"{s}.parquet") for s in SPLITS}
    recorded = ck["dataset"]["splits"]
    now = lineage(folder, own)
    if any(now[s]["rows"] != recorded[s]["rows"] or now[s]["bytes"] != recorded[s]["bytes"] for s in SPLITS):
        raise HeldOutError(
            f"{trained_on} in {cfg['store']} was rebuilt after this model trained on it: "
            "its test split is no longer the model's (train the model again, or restore the set)"
        )
    params = ck["dataset"].get("params", {})
    encoder = get_encoder(ck["encoder"]["name"])
    cp_unit = target_cp_unit(trained_on, "target", params)
    with tempfile.TemporaryDirectory(prefix="held-out-") as tmp:
        new = build_held_out(store, trained_on, params, Path(tmp) / "store", log)  # first: it may refuse
        every, unseen = held_out_tables(new, [own["train"], own["val"]])
        if not unseen.num_rows:
            raise HeldOutError(f"the store at {store} holds no position the model did not train on")
        # train read once: the majority class or material line it was fitted on, for every set
        fitted_on = train_baseline_rows(ParquetBatches(own["train"], EVALUATION), trained_on)
        out = [figures("test split", model, own["test"], fitted_on, encoder, trained_on, cp_unit)]
        for table, name in ((every, "held out: every position"), (unseen, "held out: positions not in train or val")):
            path = Path(tmp) / f"{len(out)}.parquet"
            pq.write_table(table, path, row_group_size=ROW_GROUP)
            out.append(figures(name, model, path, fitted_on, encoder, trained_on, cp_unit))
    return out


def difference(held: MeanInterval, test: MeanInterval) -> tuple[float, float, float]:
    """held - test with a 95% interval, the two sets independent (other games): each
    interval's half-width taken as 1.96 standard errors, their variances added."""
    se = math.hypot((held.high - held.low) / 3.92, (test.high - test.low) / 3.92)
    d = held.mean - test.mean
    return d, d - 1.96 * se, d + 1.96 * se


def table_text(rows: list[Figures]) -> str:
    classes = rows[0].classes
    metric = "accuracy" if classes else "MSE"
    fmt = (lambda x: f"{x:.2%}") if classes else (lambda x: f"{x:.5f}")
    signed = (lambda x: f"{x * 100:+.2f}") if classes else (lambda x: f"{x:+.5f}")
    test = rows[0].metric
    lines = [
        f"| rows | positions | games | {metric} (95%) | material | lead over material (95%) | "
        "against the test split's interval | less the test split's (95%) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        m = r.metric
        where, less = "-", "-"
        if r is not rows[0]:
            if test.low <= m.mean <= test.high:
                where = "inside"
            else:  # accuracy up is better, MSE up worse
                where = "better" if (m.mean > test.high) == bool(classes) else "worse"
            d, low, high = difference(m, test)
            less = f"{signed(d)} ({signed(low)} to {signed(high)})"
        lines.append(
            f"| {r.name} | {r.rows:,} | {r.games:,} | {fmt(m.mean)} ({fmt(m.low)}-{fmt(m.high)}) | "
            f"{fmt(r.material)} | {signed(r.lead)} +/- {signed(r.lead_ci95).lstrip('+')} | {where} | {less} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m training.held_out", description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1]
    )
    ap.add_argument("--checkpoint", required=True, help="the model's checkpoint (its store holds its dataset)")
    ap.add_argument("--store", required=True, help="the store of the held-out archives (a folder or s3://...)")
    a = ap.parse_args(argv)
    if not storage.exists(store_location(a.checkpoint)):
        sys.exit(f"error: no checkpoint at {a.checkpoint}: train one first (chess-pipeline train ...)")
    try:
        rows = compare(a.checkpoint, a.store, log=lambda s: print(s, file=sys.stderr))
    except HeldOutError as e:
        sys.exit(f"error: {e}")
    print(table_text(rows))


if __name__ == "__main__":
    main()
