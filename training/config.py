"""TrainConfig: the settings of one training run, in a module free of torch.

The Dagster definitions (the model assets' run config) and the CLI (`train --device`) derive
from it when they load, which must not cost a torch import (~1.3 s a start); training.train
re-exports it. The registries a choice field picks from are imported when a config is checked.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass
from typing import Literal, get_args, get_origin

from training.choices import Device, check_choice


def registries() -> dict[str, dict]:
    """The TrainConfig fields that name an entry of a registry, and that registry (training.models
    and training.encoders import torch: imported on the first check, not with this module)."""
    from pipeline.datasets.datasets import DATASETS
    from training.encoders import ENCODERS
    from training.models import PRESETS

    return {"dataset": DATASETS, "model": PRESETS, "encoder": ENCODERS}


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
    Pos2Vec, the piece values' autoencoder): -1 as many as `epochs`, 0 none. It gets at most half
    of max_minutes (PRETRAIN_SHARE), out of the same bound."""
    batch_size: int = 256
    """Rows per training step."""
    lr: float = 0.0
    """Learning rate; 0 takes the preset's."""
    max_train_rows: int = 0
    """Use only the first rows of train (0: all); for short CPU schedules."""
    max_eval_rows: int = 0
    """Use only the first rows of val and test (0: all)."""
    max_minutes: float = 0.0
    """Stop once this wall time has passed since training started, pretraining included, cutting
    the epoch short (0: no bound); the result says so (stopped_by, and the cut epoch's history
    row). A run resumed after a cut does the cut epoch again, whole: it ends with the weights of an
    uninterrupted run (a pretraining the bound cut is kept as it is), and a bound shorter than an
    epoch cuts that epoch again."""
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
        """Refuse a misspelled choice (dataset, model, encoder, device), naming the valid values,
        and a time bound that is negative or not a number."""
        for name, valid in config_choices().items():
            check_choice(name, getattr(self, name), valid)
        if not (math.isfinite(self.max_minutes) and self.max_minutes >= 0):
            raise ValueError(
                f"max_minutes must be 0 (no bound) or a positive number of minutes; got {self.max_minutes!r}"
            )


def config_choices(cls: type = TrainConfig) -> dict[str, tuple[str, ...]]:
    """The valid values of each choice field of a config dataclass: a Literal field's values, or
    the names of the registry (registries()) the field picks from. The CLI's `choices=` too."""
    hints = typing.get_type_hints(cls)
    known = registries()
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in known:
            out[f.name] = tuple(known[f.name])
        elif get_origin(hints[f.name]) is Literal:
            out[f.name] = get_args(hints[f.name])
    return out


SCHEDULE_BOUNDS = {
    "epochs": (1, "1 or more"),
    "max_train_rows": (0, "0 (all) or a number of rows"),
    "batch_size": (1, "1 or more"),
    "max_minutes": (0, "0 (no bound) or a positive number of minutes"),
}
"""ScheduleOverrides' fields: the least value each takes, and what it takes, in words."""


def schedule_problem(values: dict, names: dict | None = None) -> str | None:
    """What is wrong with the ScheduleOverrides `values` ({field: value}; None: left out), in one
    line naming each field as `names` has it (a command's flag), or None when nothing is."""
    for field_name, value in values.items():
        least, words = SCHEDULE_BOUNDS[field_name]
        if value is not None and not (math.isfinite(value) and value >= least):
            name = (names or {}).get(field_name, field_name)
            return f"{name} must be {words}, or left out (the profile's); got {value!r}"
    return None


@dataclass(frozen=True)
class ScheduleOverrides:
    """Changes to a training profile's schedule (training.catalog.schedule: PROFILES and the
    model's own), with one meaning per value wherever they are asked for (`chess-pipeline train`,
    a model asset's run config, `chess-pipeline reproduce`): left out (None) keeps the profile's;
    0 train rows or 0 minutes is no bound, as in TrainConfig; any other number is that number.
    `train` and the model assets put a value in place of the profile's (`replace`); `reproduce`
    takes it as a cap, never above the profile's (`cap`)."""

    epochs: int | None = None
    """Most epochs (left out: the profile's)."""
    max_train_rows: int | None = None
    """Train rows to use (0: all; left out: the profile's)."""
    batch_size: int | None = None
    """Rows per training step (left out: the profile's)."""
    max_minutes: float | None = None
    """Stop training once this wall time has passed (minutes, pretraining included: it gets at most
    half), cutting the epoch short and saying so in the metadata (`stopped_by`); 0: no bound (left
    out: the profile's)."""

    def __post_init__(self):
        if problem := schedule_problem(self.given()):
            raise ValueError(problem)

    def given(self) -> dict:
        """The overrides given ({field: value}, those not left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}

    def replace(self, schedule: dict) -> dict:
        """A profile's TrainConfig settings (training.catalog.schedule) with each value given in
        place of the profile's."""
        return {**schedule, **self.given()}

    def cap(self, schedule: dict) -> dict:
        """A profile's TrainConfig settings with each value given as a bound below the profile's:
        the smaller of the two, where 0 (no bound) is the larger of any."""
        out = dict(schedule)
        for name, value in self.given().items():
            own = out.get(name, 0)
            out[name] = min(own, value) if own and value else (own or value)
        return out
