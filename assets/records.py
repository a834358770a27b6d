"""The metadata the assets record that the command line reads back, each key declared once.

An asset writes its metadata as a dict of string keys (the Dagster UI shows them all); the CLI
prints a few of them. Each record below names the keys one asset (or asset check) writes and
the CLI reads, as the fields of a dataclass: the CLI reads `Record.read(metadata)` and then
attributes, never a string key, and tests/assets/test_cli_records.py materialises the assets
and checks that every key declared here is written. So a renamed key fails that test, not a
user's command. A field whose key is not a Python name gives it as `key("...")`; a field with
a default is written only sometimes (e.g. `empty_reason`, only for an empty dataset).
"""

import dataclasses
from collections.abc import Mapping
from typing import Any, Self


def key(name: str, default: Any = dataclasses.MISSING) -> Any:
    """A field whose metadata key is `name` (not a Python identifier)."""
    return dataclasses.field(default=default, metadata={"key": name})


@dataclasses.dataclass(frozen=True)
class Record:
    """Base of the records: `read` builds one from an asset's metadata."""

    @classmethod
    def keys(cls) -> dict[str, str]:
        """{field: metadata key} of every field."""
        return {f.name: f.metadata.get("key", f.name) for f in dataclasses.fields(cls)}

    @classmethod
    def required_keys(cls) -> set[str]:
        """The keys every materialisation writes (fields without a default)."""
        return {f.metadata.get("key", f.name) for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}

    @classmethod
    def read(cls, metadata: Mapping[str, Any]) -> Self:
        """The record from a metadata dict (MetadataValue objects or plain values); a missing
        key is a KeyError naming the record, the key and the keys that are there."""
        values = {}
        for f in dataclasses.fields(cls):
            k = f.metadata.get("key", f.name)
            if k in metadata:
                v = metadata[k]
                values[f.name] = getattr(v, "value", v)
            elif f.default is dataclasses.MISSING:
                raise KeyError(f"{cls.__name__}: the metadata has no {k!r} (it has {', '.join(metadata)})")
        return cls(**values)


# ---- ingest (assets/ingest.py: archive_tables) ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class GamesMetadata(Record):
    rows: int
    plies_per_second: float
    sha256: str | None = None
    """The sha256 of the archive bytes ingested (None: a run from before it was recorded)."""


@dataclasses.dataclass(frozen=True)
class RejectedGamesMetadata(Record):
    rows: int


@dataclasses.dataclass(frozen=True)
class PositionsMetadata(Record):
    rows: int
    bytes_per_position: float


@dataclasses.dataclass(frozen=True)
class ReconcilesWithFileCheck(Record):
    games: int
    rejected: int
    games_in_file: int = key("games_in_file (python-chess)")
    games_in_unclosed_comments: int = key("games_in_unclosed_comments")


@dataclasses.dataclass(frozen=True)
class OnePositionPerPlyCheck(Record):
    positions: int
    expected: int = key("sum(ply_count + 1)")


# ---- labels (assets/labels.py) ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class LabelsMetadata(Record):
    engine: str
    limit: str
    mode: str
    labelled: int
    failed: int
    seconds: float
    positions_per_second: float
    engines: int
    distinct_positions: int
    positions: int
    repeat_share: float
    coverage: float
    retried: int = 0
    engine_restarts: int = 0


@dataclasses.dataclass(frozen=True)
class CoverageCheck(Record):
    setting: str
    coverage: float
    unlabelled: int


@dataclasses.dataclass(frozen=True)
class ScoresInRangeCheck(Record):
    setting: str
    out_of_range: int
    out_of_range_this_run: int
    min_score: int | None
    max_score: int | None


@dataclasses.dataclass(frozen=True)
class NoDuplicateLabelsCheck(Record):
    setting: str
    duplicates: int


# ---- datasets (assets/datasets.py) -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DatasetMetadata(Record):
    rows: int
    rows_train: int
    rows_val: int
    rows_test: int
    removed_by_guard_train: int
    removed_by_guard_val: int
    removed_by_guard_test: int
    candidates: int
    label_coverage: float | None
    empty_reason: str | None = None
    """Written only when the dataset has no rows."""
    searched_by_round: list[int] | None = None
    """A searched set's (DatasetSpec.search): the train rows each round of children added."""
    searched_unlabelled: int | None = None
    """A searched set's: children left out, the engine gave no evaluation (after the pool's retries)."""

    def split_rows(self) -> dict[str, int]:
        return {"train": self.rows_train, "val": self.rows_val, "test": self.rows_test}

    def removed_by_guard(self) -> dict[str, int]:
        return {
            "train": self.removed_by_guard_train,
            "val": self.removed_by_guard_val,
            "test": self.removed_by_guard_test,
        }


# ---- models (assets/training.py) -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ModelMetadata(Record):
    checkpoint: str
    """The checkpoint this materialisation wrote: what evaluation and the explorer load (lineage)."""
    dataset: str
    model: str
    """The model preset (training.models)."""
    device: str
    epochs: int
    seconds: float
    train_positions_per_second: float
    rows_train: int
    rows_test: int
    published: str
    test_accuracy: float | None = None
    """Classifiers only (with majority_class_accuracy)."""
    majority_class_accuracy: float | None = None
    material_baseline_accuracy: float | None = None
    """Classifiers whose dataset has a material rule (training.baselines), on the same test rows."""
    material_lead: float | None = None
    """Those classifiers' test accuracy less the material rule's on the same rows (pairs, for a comparator)."""
    material_lead_ci95: float | None = None
    """Half the lead's 95% interval, clustered by game (training.train.paired_lead; pairs:
    training.deepchess.pair_baselines)."""
    test_mse: float | None = None
    """Regression models only (with test_cp_mae)."""
    test_cp_mae: float | None = None
    mean_baseline_mse: float | None = None
    """Regression models only: train's mean and the material line fitted on train, on the same test rows."""
    material_baseline_mse: float | None = None
    material_line_lead: float | None = None
    """Regression models only: the material line's test MSE less the model's on the same rows."""
    material_line_lead_ci95: float | None = None
    """Half that lead's 95% interval, clustered by game (training.train.line_lead)."""
