"""Training sets as SQL files (sql/datasets/<name>.sql), split by game without leakage.

A dataset query returns one row per candidate position with the position's columns
(position_key, planes, side_to_move, castling, ep_square, clocks), game_id, ply, `target`
(NULL where the position has no label, so label coverage can be reported) and whatever
further columns the dataset needs. build_dataset binds its parameters, splits the labelled
rows by game (identical move sequences count as one game), removes from train and val every
position key that test (or, for train, val) holds, and writes
datasets/<name>/{train,val,test}.parquet, each file under a temporary name first.

A set with no rows says why (DatasetStats.empty_reason, dataset_problem): the store has no
games, no game passes the set's filters, or no label of the set's setting covers its
positions, and then which settings the store has labels for. These are worked out from the
store, so the message names the fix (`chess-pipeline label --depth 8`, or `datasets NAME --depth 6`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Literal, get_args

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import LIMIT_KINDS, Limit, LimitKind
from pipeline.store import storage
from pipeline.store.duck import glob_escape, load_sql, memory_connection
from pipeline.store.store import Store
from pipeline.store.store_files import write_parquet

SPLITS = ("train", "val", "test")
ROW_GROUP = 65_536
_PARAM = re.compile(r"\$([a-z_][a-z0-9_]*)")
BUILT_KEY = b"chess_pipeline.dataset"
"""Parquet key-value metadata of every split file: the dataset, its parameters and split (JSON)."""
ELO_PARAMS = ("min_elo", "min_avg_elo")
"""Rating filters: a set left empty by one says how many positions 0 would keep."""


Pov = Literal["side_to_move", "white"]
"""Whose score a Sabatelli set's target is (sql/views/label_macros.sql, sabatelli_positions)."""
TargetKind = Literal["linear", "win_prob"]
"""Which column is sabatelli_regression's target (sql/datasets/sabatelli_regression.sql)."""
SplitBy = Literal["game", "position"]
CHOICE_PARAMS = {"pov": Pov, "target_kind": TargetKind}
"""The SQL parameters that are choices, and their types (checked by dataset_values; label_kind by Limit)."""


# The SQL parameters of each dataset, declared once: the field names are the `$name`s of the
# SQL, the defaults the published setting where there is one, the docstrings the descriptions
# (DatasetSpec.defaults; the datasets' Dagster configs and CLI flags are derived from these).


@dataclass(frozen=True)
class LabelSetting:
    """Which Stockfish labels a labelled set's targets come from."""

    label_kind: LimitKind = Limit().kind
    """Label setting the targets come from: depth, nodes or static (as `chess-pipeline label`
    made them: --depth, --nodes or --static; the same flags choose them here)."""
    label_value: int = Limit().value
    """Depth or nodes of that setting (default: Limit's, Sabatelli's); ignored for static."""
    label_engine: str = ""
    """Engine name + version, e.g. 'Stockfish 15.1'; empty: any engine (the deepest label)."""


@dataclass(frozen=True)
class SabatelliParams(LabelSetting):
    min_elo: int = 2000
    """Both players rated over this (engine games are always in)."""
    pov: Pov = "side_to_move"
    """Whose score: side_to_move (the thesis: every position as if White were to move) or white."""


@dataclass(frozen=True)
class SabatelliRegressionParams(SabatelliParams):
    clip_cp: int = 1500
    """Scores are clipped to +/- this many centipawns, then mapped linearly onto [0, 1]; mates go to 0 / 1."""
    wp_scale: float = 400.0
    """win_prob = 1 / (1 + 10^(-cp / wp_scale))."""
    target_kind: TargetKind = "linear"
    """linear or win_prob: which one is `target` (both are columns)."""


@dataclass(frozen=True)
class SabatelliClassSearchParams(SabatelliParams):
    label_kind: LimitKind = "static"
    """Label setting the targets come from: static only (the searched children are labelled by
    Stockfish's static eval, so the game positions they join must be too)."""
    label_value: int = 0
    """Ignored for static."""
    search_children: tuple[int, ...] = (2,)
    """One round each: children of every train row so far a round adds (pipeline.datasets.search_positions)."""
    search_seed: int = 0
    """Seed of the first round's random moves; round r's is this + r, so seeds next to each other
    share rounds' draws (seeds a round count apart, e.g. 0 and 10, do not)."""

    def __post_init__(self):
        if self.label_kind != "static":
            raise ValueError(
                f"label_kind must be static, got {self.label_kind}: the searched children are labelled by "
                "Stockfish's static eval, so the game positions they join must be (`--static`)"
            )
        if not self.search_children or min(self.search_children) < 1:
            raise ValueError(
                f"search_children must be one or more counts of at least 1, got {list(self.search_children)}"
            )


@dataclass(frozen=True)
class SabatelliSearchParams(SabatelliClassSearchParams, SabatelliRegressionParams):
    search_children: tuple[int, ...] = (2, 1, 1, 1)
    """One round each: children of every train row so far a round adds (pipeline.datasets.search_positions).
    Four rounds: the set mlp_search learnt the evaluation that plays best at equal time from
    (docs/results/lubeck-grid.md, "At equal time")."""
    target_kind: TargetKind = "win_prob"
    """linear or win_prob: which one is `target` (both are columns). The search's set learns the win
    probability, where a centipawn near equality weighs more than one of a won position."""


@dataclass(frozen=True)
class DeepChessParams:
    sample_seed: int = 0
    """Seed of the random choice of positions within each game."""
    per_game: int = 10
    """Positions drawn from each decisive game."""
    skip_moves: int = 5
    """Never from a game's first moves (DeepChess: 5)."""


@dataclass(frozen=True)
class DeepChessScoredParams(DeepChessParams, LabelSetting):
    """DeepChess's sampling, and the label setting of its positions' `score` (--static: Stockfish's
    static eval, a label for every position not in check at little cost)."""

    per_game: int = 10
    """Positions drawn from each decisive game of val and test (deepchess's); train takes every one."""


@dataclass(frozen=True)
class LubeckParams:
    min_avg_elo: int = 2000
    """Games whose players' average rating is over this (engine games are always in)."""


@dataclass(frozen=True)
class HuiParams:
    min_elo: int = 1500
    """Both players rated over this."""
    gamestage: float = 0.2
    """Positions from this final share of each game's plies."""


@dataclass(frozen=True)
class PieceValuesParams(LabelSetting):
    min_elo: int = 0
    """Both players rated over this (0: every game)."""
    max_cp: int = 1500
    """Leave out positions scored beyond +/- this many centipawns (and mates)."""


_LABEL = tuple(f.name for f in fields(LabelSetting))


@dataclass(frozen=True)
class DatasetSpec:
    name: str
    description: str
    classes: int = 0
    """Number of target classes; 0 for a regression target."""
    labelled: bool = True
    """Whether the target comes from Stockfish labels (else from the games)."""
    params: type = LabelSetting
    """The dataclass of its SQL parameters (its fields and defaults: the published setting)."""
    candidates: str = ""
    """Which positions the SQL takes, with {parameter} placeholders (for the empty-set message)."""
    sql: str = ""
    """The SQL file it runs (sql/datasets/<sql>.sql); empty: its name's."""
    search: bool = False
    """Its train split grows by rounds of searched children (pipeline.datasets.search_positions), labelled
    by Stockfish's static eval as the set is built."""
    class_macro: str = ""
    """A class set's material rule: the SQL macro (sql/views/macros.sql) mapping centipawns onto its
    classes, which classifies 100 x material (training.baselines). A Sabatelli set's SQL file makes
    its `target` from `score` by the same macro, and so does a searched set for its children (the
    build checks that it gives the game rows' targets). Empty: no material rule."""
    published: bool = True
    """A published system's set, which the reproduction builds (and splits as published too); False:
    ours only (deepchess_scored), built and trained when named. A searched set is always ours."""
    held_out: str = ""
    """A boolean column of its SQL: val and test keep only the rows where it is true, train keeps
    every row, and the column is not written (deepchess_scored: val and test are deepchess's rows,
    train every eligible position of its games). Empty: every split keeps every row."""

    @property
    def defaults(self) -> dict:
        """The SQL parameters and their defaults (the fields of `params`)."""
        return asdict(self.params())


_RATED = "positions of games whose players are both rated over {min_elo}, or of engine games"

DATASETS = {
    s.name: s
    for s in [
        DatasetSpec(
            "sabatelli_3class",
            "Sabatelli: win / draw / loss at +/-1.5 pawns",
            3,
            params=SabatelliParams,
            candidates=_RATED,
            class_macro="sabatelli_class3",
        ),
        DatasetSpec(
            "sabatelli_15class",
            "Sabatelli: 15 classes, one per pawn beyond +/-1.5",
            15,
            params=SabatelliParams,
            candidates=_RATED,
            class_macro="sabatelli_class15",
        ),
        DatasetSpec(
            "sabatelli_20class",
            "Sabatelli: 20 classes, the draw region in half pawns",
            20,
            params=SabatelliParams,
            candidates=_RATED,
            class_macro="sabatelli_class20",
        ),
        DatasetSpec(
            "sabatelli_regression",
            "Sabatelli: the score mapped onto [0, 1] (or a win probability)",
            0,
            params=SabatelliRegressionParams,
            candidates=_RATED,
        ),
        DatasetSpec(
            "sabatelli_regression_search",
            "sabatelli_regression on static labels, its train split grown by rounds of random children "
            "of its positions (those a search scores), each labelled by Stockfish's static eval",
            0,
            params=SabatelliSearchParams,
            candidates=_RATED,
            sql="sabatelli_regression",
            search=True,
        ),
        DatasetSpec(
            "sabatelli_3class_search",
            "sabatelli_3class on static labels, its train split grown by rounds of random children of its "
            "positions (those a search scores), each labelled by Stockfish's static eval",
            3,
            params=SabatelliClassSearchParams,
            candidates=_RATED,
            sql="sabatelli_3class",
            search=True,
            class_macro="sabatelli_class3",
        ),
        DatasetSpec(
            "deepchess",
            "DeepChess: 10 random positions per decisive game, tagged by winner",
            2,
            labelled=False,
            params=DeepChessParams,
            candidates="positions of decisive games after move {skip_moves}, not reached by a capture",
        ),
        DatasetSpec(
            "deepchess_scored",
            "DeepChess's positions with Stockfish's score: train every eligible position of its decisive "
            "games, each with its score (White's view); val and test deepchess's rows, tagged by winner",
            2,
            labelled=False,
            params=DeepChessScoredParams,
            candidates="positions of decisive games after move {skip_moves}, not reached by a capture",
            held_out="deepchess_row",
            published=False,
        ),
        DatasetSpec(
            "lubeck_wdl",
            "Lubeck: every position of games averaging over 2000, the result as target",
            3,
            labelled=False,
            params=LubeckParams,
            candidates="positions of finished games whose players average over {min_avg_elo}, or of engine games",
            # The game's result from White's view, 0 Black won / 1 draw / 2 White won: as 3 classes.
            class_macro="sabatelli_class3",
        ),
        DatasetSpec(
            "hui_checkmate",
            "Hui: the last part of games ending in mate, the winner as target",
            2,
            labelled=False,
            params=HuiParams,
            candidates="positions of games ending in mate whose players are both rated over {min_elo}",
        ),
        DatasetSpec(
            "piece_values",
            "Centipawn targets (pawns, White's view) for the piece-value network",
            0,
            params=PieceValuesParams,
            candidates="positions of games whose players are both rated over {min_elo} (0: every game), or of "
            "engine games, within +/-{max_cp} centipawns",
        ),
    ]
}


@dataclass(frozen=True)
class SplitConfig:
    seed: int = 0
    """Seed of the by-game split (the same seed always gives the same split)."""
    val_fraction: float = 0.1
    """Share of games (groups of identical games) in val."""
    test_fraction: float = 0.1
    """Share of games in test."""
    by: SplitBy = "game"
    """game (groups of identical games) or position: rows split one by one, as the thesis
    split its positions, so repeated positions and games straddle splits (for comparison)."""
    guard: bool = True
    """The leakage guard: no test or val position key in train, none shared by val and test
    (off only to compare with the thesis)."""

    def __post_init__(self):
        if not (0 <= self.val_fraction and 0 <= self.test_fraction and self.val_fraction + self.test_fraction < 1):
            raise ValueError(
                f"val_fraction + test_fraction must be in [0, 1), got {self.val_fraction} + {self.test_fraction}"
            )
        if self.by not in get_args(SplitBy):
            raise ValueError(f"split by must be {' or '.join(get_args(SplitBy))}, got {self.by!r}")


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
    searched: list = field(default_factory=list)
    """Train rows each round of searched children added (DatasetSpec.search)."""
    searched_unlabelled: int = 0
    """Searched children left out: the engine gave no evaluation (after the pool's retries)."""
    folder: str = ""
    empty_reason: str = ""
    """Why no position made it into the set (empty when some did): what is missing and the fix."""

    @property
    def labelled(self) -> int:
        """Candidate positions with a target (the rows before the split)."""
        return self.candidates - self.unlabelled

    @property
    def label_coverage(self) -> float | None:
        """Share of candidate positions with a label; None when there are no candidates."""
        return 1 - self.unlabelled / self.candidates if self.candidates else None


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


def dataset_values(name: str, params: dict | None = None) -> dict:
    """The SQL parameters of DATASETS[name]: params over its defaults, checked (a label setting
    is a valid Limit; static has no value, stored as 0)."""
    spec = DATASETS.get(name)
    if spec is None:
        raise KeyError(f"no dataset {name!r}; known: {', '.join(DATASETS)}")
    unknown = set(params or {}) - spec.defaults.keys()
    if unknown:
        raise ValueError(f"{name} has no parameters {sorted(unknown)}; it takes {sorted(spec.defaults)}")
    values = {**spec.defaults, **(params or {})}
    for param, choice in CHOICE_PARAMS.items():
        if param in values and values[param] not in get_args(choice):
            raise ValueError(f"{name}: {param} must be one of {', '.join(get_args(choice))}; got {values[param]!r}")
    if "label_kind" in values:
        values["label_value"] = Limit(values["label_kind"], values["label_value"]).value
    spec.params(**values)  # the set's own checks (SabatelliSearchParams: static labels only)
    return values


def _sql(name: str) -> str:
    return load_sql(f"datasets/{DATASETS[name].sql or name}").rstrip().rstrip(";")


def _candidates(con, name: str, values: dict) -> tuple[int, int]:
    """Create the temp table `candidate` (the dataset's query); returns (rows, rows without target)."""
    sql = _sql(name)
    con.execute(f"CREATE OR REPLACE TEMP TABLE candidate AS {sql}", sql_params(sql, values))
    return tuple(con.execute("SELECT count(*), count(*) FILTER (WHERE target IS NULL) FROM candidate").fetchall()[0])


def setting_text(kind: str, value: int, engine: str = "") -> str:
    """A label setting as people say it: 'depth 8', 'nodes 10000', 'static' (+ ' by ENGINE')."""
    text = str(Limit(kind, value)) if kind in LIMIT_KINDS else f"{kind} {value}"
    return f"{text} by {engine}" if engine else text


def empty_reason(con, name: str, values: dict, candidates: int) -> str:
    """Why DATASETS[name] with these values has no labelled candidate: worked out from the store
    (over a connection holding the `candidate` table). One sentence with the fix."""
    spec = DATASETS[name]
    games, positions = con.execute("SELECT (SELECT count(*) FROM games), (SELECT count(*) FROM positions)").fetchall()[
        0
    ]
    if not positions:
        return "the store has no games (add archives: `chess-pipeline ingest PATH...`)"
    if not candidates:
        what = spec.candidates.format(**values) if spec.candidates else "its positions"
        reason = f"none of the store's {games:,} games gives {what}"
        for p in ELO_PARAMS:
            if values.get(p, 0) > 0:
                sql = _sql(name)
                [(kept,)] = con.execute(f"SELECT count(*) FROM ({sql})", sql_params(sql, {**values, p: 0})).fetchall()
                if kept:
                    return f"{reason} ({p} 0 would keep {kept:,} positions: set {p} lower in the run config)"
        return f"{reason} (ingest archives with such games)"
    kind, value, engine = values["label_kind"], values["label_value"], values["label_engine"]
    want = Limit(kind, value).slug + (f" labels by {engine}" if engine else " labels")
    cover = con.execute(  # candidate rows each setting has labels for
        "SELECT engine, limit_kind, limit_value, count(*) AS n FROM candidate "
        "JOIN (SELECT DISTINCT engine, limit_kind, limit_value, position_key FROM labels) USING (position_key) "
        "GROUP BY ALL ORDER BY n DESC, 1, 2, 3"
    ).fetchall()
    label_cmd = f"`chess-pipeline label {Limit(kind, value).flags}`"
    if not cover:
        [(total,)] = con.execute("SELECT count(*) FROM labels").fetchall()
        if not total:
            return f"the store has no labels yet; its {candidates:,} candidate positions need {want} (run {label_cmd})"
        return (
            f"no label in the store covers its {candidates:,} candidate positions (the store's {total:,} labels "
            f"are of other positions): run {label_cmd}"
        )
    engines = {e for e, _, _, _ in cover}
    has = ", ".join(
        f"{setting_text(k, v, e if engine or len(engines) > 1 else '')} ({n:,} of them)" for e, k, v, n in cover
    )
    if spec.search:  # static labels only: no other setting to build from
        return f"no {want} for its {candidates:,} candidate positions; the store has labels for {has}: run {label_cmd}"
    e0, k0, v0, _ = cover[0]
    use = Limit(k0, v0).flags + (f' --label-engine "{e0}"' if engine and e0 != engine else "")
    return (
        f"no {want} for its {candidates:,} candidate positions; the store has labels for {has}: "
        f"run {label_cmd}, or build from those with `chess-pipeline datasets {name} {use}`"
    )


@dataclass(frozen=True)
class SearchEngine:
    """What grows a DatasetSpec.search set: the run's engine pool that labels its children, and
    where the rounds and progress are told."""

    pool: EnginePool
    """Started (`with`); its engine must be the one the set's static labels are by."""
    log: Callable[[str], None] = print
    progress: Callable[[str], Callable[[int, int], None]] | None = None
    """progress(what) for each round: its progress(children labelled, children of the round)."""


def build_dataset(
    store: Store,
    name: str,
    params: dict | None = None,
    split: SplitConfig = SplitConfig(),
    out: Store | None = None,
    engine: SearchEngine | None = None,
) -> DatasetStats:
    """Materialise one dataset (DATASETS[name]) with params over its defaults, from the store's
    tables into `out`'s datasets/<name>/ (default: the store's own; the reproduction's
    published-split copies go to a store of their own). A DatasetSpec.search set needs `engine`,
    the Stockfish its game positions' static labels are by."""
    out = out or store
    values = dataset_values(name, params)
    spec = DATASETS[name]
    if spec.search and engine is None:
        raise ValueError("its searched children are labelled by Stockfish: give it the engine pool")
    stats = DatasetStats(name)
    with memory_connection(store) as con:
        stats.candidates, stats.unlabelled = _candidates(con, name, values)
        if spec.search:
            _check_engine(con, values, engine.pool.name)
        if not stats.labelled:
            stats.empty_reason = empty_reason(con, name, values, stats.candidates)
        split_values = {
            "seed": split.seed,
            "val_fraction": split.val_fraction,
            "test_fraction": split.test_fraction,
            "by": split.by,
        }
        assign = load_sql("queries/split_assign")
        con.execute(assign, sql_params(assign, split_values))
        if spec.held_out:  # before the guard, so that it removes what the held-out rows hold
            con.execute(f"DELETE FROM assigned WHERE split <> 'train' AND NOT {spec.held_out}")
            con.execute(f"ALTER TABLE assigned DROP COLUMN {spec.held_out}")
        con.execute(
            load_sql("queries/split_guard")
            if split.guard
            else "CREATE OR REPLACE TEMP TABLE split_rows AS SELECT * FROM assigned"
        )
        before = dict(con.execute("SELECT split, count(*) FROM assigned GROUP BY 1").fetchall())
        after = dict(con.execute("SELECT split, count(*) FROM split_rows GROUP BY 1").fetchall())
        stats.games = dict(con.execute("SELECT split, count(DISTINCT game_id) FROM split_rows GROUP BY 1").fetchall())
        for s in SPLITS:
            stats.rows[s] = after.get(s, 0)
            stats.removed[s] = before.get(s, 0) - after.get(s, 0)
        if spec.classes:
            for s, cls, n in con.execute("SELECT split, target, count(*) FROM split_rows GROUP BY ALL").fetchall():
                stats.histogram.setdefault(s, {})[int(cls)] = n
        made = datetime.now(UTC)
        tables = {}
        for s in SPLITS:
            table = con.sql(
                "SELECT $dataset AS dataset, * EXCLUDE (split), split, $made AS materialised_at "
                "FROM split_rows WHERE split = $split ORDER BY game_id, ply",
                params={"dataset": name, "split": s, "made": made},
            ).to_arrow_table()
            i = table.schema.get_field_index("planes")
            tables[s] = table.set_column(i, "planes", table.column("planes").cast(pa.binary(96)))  # as in positions
    if spec.search and tables["train"].num_rows:
        grown = _searched(name, tables, values, made, engine)
        tables["train"], stats.searched, stats.searched_unlabelled = grown.train, grown.added, grown.unlabelled
        stats.rows["train"] = tables["train"].num_rows
        if spec.classes:  # train's classes with its children's
            classes, counts = np.unique(tables["train"].column("target").to_numpy(), return_counts=True)
            stats.histogram["train"] = {int(c): int(n) for c, n in zip(classes, counts, strict=True)}
    if not spec.classes:
        for s, table in tables.items():
            if table.num_rows:
                t = table.column("target").to_numpy()
                stats.target_summary[s] = (float(t.mean()), float(t.std()), float(t.min()), float(t.max()))
    built = json.dumps({"dataset": name, "params": values, "split": asdict(split)})
    for s, table in tables.items():
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), BUILT_KEY: built})
        write_parquet(dataset_dir(out, name) / f"{s}.parquet", table, row_group_size=ROW_GROUP)
    stats.folder = str(dataset_dir(out, name))
    stats.overlap = split_overlap(out, name)
    return stats


def _check_engine(con, values: dict, engine: str) -> None:
    """The engine that would label a search set's children is the one its game positions' static
    labels are by (the `candidate` table's), so that one evaluation scores every row."""
    if values["label_engine"]:
        by = [values["label_engine"]]
    else:
        by = [
            e
            for (e,) in con.execute(
                "SELECT DISTINCT engine FROM labels WHERE limit_kind = 'static' AND position_key IN "
                "(SELECT position_key FROM candidate WHERE target IS NOT NULL) ORDER BY 1"
            ).fetchall()
        ]
    if len(by) > 1:
        fix = (
            f"choose {engine}'s, its children's engine, with label_engine (`--label-engine \"{engine}\"`)"
            if engine in by
            else f"none is its children's engine ({engine}): give one of theirs (STOCKFISH_PATH, or the stockfish "
            "resource's path) and choose it with label_engine (`--label-engine NAME`)"
        )
        raise ValueError(f"its game positions' static labels are by {' and '.join(by)}: {fix}")
    if by and by != [engine]:
        raise ValueError(
            f"its game positions' static labels are by {by[0]}, but its children would be labelled by {engine}: "
            f"give {by[0]} (STOCKFISH_PATH, or the stockfish resource's path), or label the positions with this "
            f"engine (`chess-pipeline label --static`) and choose them with label_engine "
            f'(`--label-engine "{engine}"`)'
        )


def _searched(name: str, tables: dict, values: dict, made, engine: SearchEngine):
    """The train table grown by pipeline.datasets.search_positions (a Grown: its dataset and
    materialised_at columns set on the new rows as on the old; a class set's targets by its
    DatasetSpec.class_macro)."""
    from pipeline.datasets.search_positions import grow

    held_out = set()
    for table in tables.values():
        held_out.update(table.column("position_key").to_pylist())
    classify = None
    if DATASETS[name].classes:
        classify = partial(classes_of, DATASETS[name].class_macro)
        train = tables["train"]
        if not np.array_equal(classify(train.column("score").to_numpy()), train.column("target").to_numpy()):
            raise ValueError(
                f"{name}: {DATASETS[name].class_macro}(score) does not give its game rows' targets; its "
                "DatasetSpec.class_macro must be the macro its SQL file takes the target from"
            )
    got = grow(tables["train"], held_out, values, engine.pool, engine.log, engine.progress, classify)
    grown, n = got.train, got.train.num_rows
    for column, value in (("dataset", name), ("materialised_at", made)):
        i = grown.schema.get_field_index(column)
        grown = grown.set_column(i, grown.schema.field(i), pa.array([value] * n, type=grown.schema.field(i).type))
    return replace(got, train=grown)


def classes_of(macro: str, score: np.ndarray) -> np.ndarray:
    """`macro`(score) for each centipawn score (int32), by DuckDB with the views' macros, as a
    dataset's SQL applies it (a searched set's children; the material rule, training.baselines)."""
    with duckdb.connect() as con:
        con.execute(load_sql("views/macros"))
        con.register("scores", pa.table({"i": np.arange(len(score)), "score": score}))
        return con.sql(f"SELECT {macro}(score)::INTEGER AS target FROM scores ORDER BY i").fetchnumpy()["target"]


def _num_rows(path) -> int:
    """Rows of a local or S3 Parquet file (from its footer)."""
    fs, where = storage.read_filesystem(path)
    return pq.read_metadata(where, filesystem=fs).num_rows


def built_with(path: Path) -> dict:
    """What a split file was built from: {"dataset", "params", "split"} ({} for files written before
    build_dataset recorded it)."""
    fs, where = storage.read_filesystem(path)
    meta = pq.read_schema(where, filesystem=fs).metadata or {}
    return json.loads(meta[BUILT_KEY]) if BUILT_KEY in meta else {}


def protocol_text(split: dict) -> str:
    """A split file's protocol in words, from the `split` that built_with records (`by` game or
    position, `guard`): ours (by game, leakage guard on) or the published one (by position, no guard)."""
    by, guard = split.get("by", "game"), split.get("guard", True)
    if by == "position" and not guard:
        return "published protocol: split by position, no leakage guard"
    ours = " (ours)" if by == "game" and guard else ""
    return f"split by {by}, leakage guard {'on' if guard else 'off'}{ours}"


def dataset_problem(store: Store, name: str) -> str:
    """Why DATASETS[name]'s files cannot be trained on (not built, no rows, a split without rows),
    in one sentence with the fix; '' when they can. A set with no rows is diagnosed again from
    the store as it is now, with the parameters the files were built with."""
    folder = dataset_dir(store, name)
    files = {s: folder / f"{s}.parquet" for s in SPLITS}
    if not all(storage.exists(p) for p in files.values()):
        return f"{name} is not built yet (run `chess-pipeline datasets {name}`)"
    rows = {s: _num_rows(p) for s, p in files.items()}
    if not any(rows.values()):
        params = built_with(files["train"]).get("params") or {}
        values = dataset_values(name, {k: v for k, v in params.items() if k in DATASETS[name].defaults})
        with memory_connection(store) as con:
            candidates, unlabelled = _candidates(con, name, values)
            if candidates - unlabelled:
                again = f"chess-pipeline datasets {name}"
                if "label_kind" in values and any(values[k] != DATASETS[name].defaults[k] for k in _LABEL):
                    again += " " + Limit(values["label_kind"], values["label_value"]).flags
                    again += f' --label-engine "{values["label_engine"]}"' if values["label_engine"] else ""
                return (
                    f"{name} has no rows, but the store now has {candidates - unlabelled:,} positions for it "
                    f"(build it again: `{again}`)"
                )
            return f"{name} has no rows: {empty_reason(con, name, values, candidates)}"
    empty = [s for s in SPLITS if not rows[s]]
    if empty:
        counts = ", ".join(f"{s} {rows[s]:,}" for s in SPLITS)
        return (
            f"{name} has no {' or '.join(empty)} rows ({counts}): more games (identical games count once), "
            f"or larger split fractions (`chess-pipeline datasets {name} --val-fraction 0.2 --test-fraction 0.2`)"
        )
    return ""


def split_overlap(store: Store, name: str) -> dict:
    """Position keys the written split files share, pair by pair (read back from disk)."""
    files = {s: glob_escape(str(dataset_dir(store, name) / f"{s}.parquet")) for s in SPLITS}
    with memory_connection(store) as con:
        keys = {s: f"(SELECT DISTINCT position_key FROM read_parquet(${s}))" for s in SPLITS}
        out = {}
        for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
            out[f"{a}/{b}"] = con.execute(
                f"SELECT count(*) FROM {keys[a]} x SEMI JOIN {keys[b]} y USING (position_key)",
                {a: files[a], b: files[b]},
            ).fetchall()[0][0]
    return out
