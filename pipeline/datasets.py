"""Training sets as SQL files (sql/datasets/<name>.sql), split by game without leakage.

A dataset query returns one row per candidate position with the position's columns
(position_key, planes, side_to_move, castling, ep_square, clocks), game_id, ply, `target`
(NULL where the position has no label, so label coverage can be reported) and whatever
further columns the dataset needs. build_dataset binds its parameters, splits the labelled
rows by game (identical move sequences count as one game), removes from train and val every
position key that test (or, for train, val) holds, and writes
datasets/<name>/{train,val,test}.parquet, each file under a temporary name first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.duck import load_sql, memory_connection
from pipeline.store import PARQUET_OPTIONS, Store, atomic_path

SPLITS = ("train", "val", "test")
SCHEMA = pa.schema([("dataset", pa.string()), ("position_key", pa.uint64()), ("game_id", pa.int64()),
                    ("ply", pa.uint16()), ("target", pa.float64()), ("split", pa.string())])
"""The columns every dataset file has (the `datasets` view binds to these before any exists)."""
ROW_GROUP = 65_536
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    classes: int = 0
    """Number of target classes; 0 for a regression target."""
    labelled: bool = True
    """Whether the target comes from Stockfish labels (else from the games)."""
    defaults: dict = field(default_factory=dict)
    """The SQL parameters and their defaults (the published setting where there is one)."""


_LABEL = {"label_kind": "depth", "label_value": 8, "label_engine": ""}
_SABATELLI = {"min_elo": 2000, **_LABEL, "pov": "side_to_move"}

DATASETS = {s.name: s for s in [
    DatasetSpec("sabatelli_3class", "Sabatelli: win / draw / loss at +/-1.5 pawns", 3, defaults=_SABATELLI),
    DatasetSpec("sabatelli_15class", "Sabatelli: 15 classes, one per pawn beyond +/-1.5", 15, defaults=_SABATELLI),
    DatasetSpec("sabatelli_20class", "Sabatelli: 20 classes, the draw region in half pawns", 20,
                defaults=_SABATELLI),
    DatasetSpec("sabatelli_regression", "Sabatelli: the score mapped onto [0, 1] (or a win probability)", 0,
                defaults={**_SABATELLI, "clip_cp": 1500, "wp_scale": 400.0, "target_kind": "linear"}),
    DatasetSpec("deepchess", "DeepChess: 10 random positions per decisive game, tagged by winner", 2,
                labelled=False, defaults={"sample_seed": 0, "per_game": 10, "skip_moves": 5}),
    DatasetSpec("lubeck_wdl", "Lubeck: every position of games averaging over 2000, the result as target", 3,
                labelled=False, defaults={"min_avg_elo": 2000}),
    DatasetSpec("hui_checkmate", "Hui: the last part of games ending in mate, the winner as target", 2,
                labelled=False, defaults={"min_elo": 1500, "gamestage": 0.2}),
    DatasetSpec("piece_values", "Centipawn targets (pawns, White's view) for the piece-value network", 0,
                defaults={"min_elo": 0, **_LABEL, "max_cp": 1500}),
]}


@dataclass(frozen=True)
class SplitConfig:
    seed: int = 0
    """Seed of the by-game split (the same seed always gives the same split)."""
    val_fraction: float = 0.1
    test_fraction: float = 0.1
    by: str = "game"
    """game (groups of identical games) or position: rows split one by one, as the thesis
    split its positions, so repeated positions and games straddle splits (for comparison)."""
    guard: bool = True
    """The leakage guard: no test or val position key in train, none shared by val and test."""

    def __post_init__(self):
        if not (0 <= self.val_fraction and 0 <= self.test_fraction and self.val_fraction + self.test_fraction < 1):
            raise ValueError(f"val_fraction + test_fraction must be in [0, 1), got {self.val_fraction} + "
                             f"{self.test_fraction}")
        if self.by not in ("game", "position"):
            raise ValueError(f"split by must be game or position, got {self.by!r}")


@dataclass
class DatasetStats:
    name: str
    candidates: int = 0
    unlabelled: int = 0
    rows: dict = field(default_factory=dict)
    """Rows per split after the leakage guard."""
    removed: dict = field(default_factory=dict)
    """Rows the leakage guard took out of each split."""
    games: dict = field(default_factory=dict)
    histogram: dict = field(default_factory=dict)
    """split -> {class: rows} for class targets."""
    target_summary: dict = field(default_factory=dict)
    """split -> (mean, std, min, max) for regression targets."""
    overlap: dict = field(default_factory=dict)
    """Position keys shared by two splits in the written files (all 0 when the guard held)."""
    folder: str = ""

    @property
    def label_coverage(self) -> float:
        return 1 - self.unlabelled / self.candidates if self.candidates else 1.0


def dataset_dir(store: Store, name: str) -> Path:
    return store.root / "datasets" / name


def sql_params(sql: str, params: dict) -> dict:
    """The parameters the SQL text uses, from params (DuckDB rejects extra ones); every
    parameter the text names must be given."""
    names = set(_PARAM.findall(sql))
    missing = names - params.keys()
    if missing:
        raise ValueError(f"missing SQL parameters: {sorted(missing)}")
    return {k: params[k] for k in names}


def build_dataset(store: Store, name: str, params: dict | None = None, split: SplitConfig = SplitConfig()
                  ) -> DatasetStats:
    """Materialise one dataset (DATASETS[name]) with params over its defaults."""
    spec = DATASETS.get(name)
    if spec is None:
        raise KeyError(f"no dataset {name!r}; known: {', '.join(DATASETS)}")
    unknown = set(params or {}) - spec.defaults.keys()
    if unknown:
        raise ValueError(f"{name} has no parameters {sorted(unknown)}; it takes {sorted(spec.defaults)}")
    values = {**spec.defaults, **(params or {})}
    stats = DatasetStats(name)
    sql = load_sql(f"datasets/{name}").rstrip().rstrip(";")
    with memory_connection(store) as con:
        con.execute(f"CREATE OR REPLACE TEMP TABLE candidate AS {sql}", sql_params(sql, values))
        stats.candidates, stats.unlabelled = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE target IS NULL) FROM candidate").fetchall()[0]
        split_values = {"seed": split.seed, "val_fraction": split.val_fraction, "test_fraction": split.test_fraction,
                        "by": split.by}
        assign = load_sql("queries/split_assign")
        con.execute(assign, sql_params(assign, split_values))
        con.execute(load_sql("queries/split_guard") if split.guard
                    else "CREATE OR REPLACE TEMP TABLE split_rows AS SELECT * FROM assigned")
        before = dict(con.execute("SELECT split, count(*) FROM assigned GROUP BY 1").fetchall())
        after = dict(con.execute("SELECT split, count(*) FROM split_rows GROUP BY 1").fetchall())
        stats.games = dict(con.execute("SELECT split, count(DISTINCT game_id) FROM split_rows GROUP BY 1").fetchall())
        for s in SPLITS:
            stats.rows[s] = after.get(s, 0)
            stats.removed[s] = before.get(s, 0) - after.get(s, 0)
        if spec.classes:
            for s, cls, n in con.execute("SELECT split, target, count(*) FROM split_rows GROUP BY ALL").fetchall():
                stats.histogram.setdefault(s, {})[int(cls)] = n
        else:
            for s, *summary in con.execute("SELECT split, avg(target), stddev_pop(target), min(target), max(target) "
                                           "FROM split_rows GROUP BY 1").fetchall():
                stats.target_summary[s] = tuple(summary)
        made = datetime.now(timezone.utc)
        for s in SPLITS:
            table = con.sql("SELECT $dataset AS dataset, * EXCLUDE (split), split, $made AS materialised_at "
                            "FROM split_rows WHERE split = $split ORDER BY game_id, ply",
                            params={"dataset": name, "split": s, "made": made}).to_arrow_table()
            i = table.schema.get_field_index("planes")
            table = table.set_column(i, "planes", table.column("planes").cast(pa.binary(96)))  # as in positions
            path = dataset_dir(store, name) / f"{s}.parquet"
            with atomic_path(path) as tmp:
                pq.write_table(table, tmp, row_group_size=ROW_GROUP, **PARQUET_OPTIONS)
    stats.folder = str(dataset_dir(store, name))
    stats.overlap = split_overlap(store, name)
    return stats


def split_overlap(store: Store, name: str) -> dict:
    """Position keys the written split files share, pair by pair (read back from disk)."""
    files = {s: str(dataset_dir(store, name) / f"{s}.parquet") for s in SPLITS}
    with memory_connection(store) as con:
        keys = {s: f"(SELECT DISTINCT position_key FROM read_parquet(${s}))" for s in SPLITS}
        out = {}
        for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
            out[f"{a}/{b}"] = con.execute(
                f"SELECT count(*) FROM {keys[a]} x SEMI JOIN {keys[b]} y USING (position_key)",
                {a: files[a], b: files[b]}).fetchall()[0][0]
    return out

