"""`chess-pipeline demo`: the whole asset graph on the store: ingest, views, labels, the 3-class
dataset, training, a quick evaluation. A store with no archives gets real games first (the
FICS archives of ../shared/data/pgn, linked and read in place), or, on a machine without them,
a self-play sample (too small to learn from: the demo says so). It calls the other commands'
services, as a script would, and ends with the network's test accuracy beside the majority
class and the material rule on the same test positions."""

import argparse
from dataclasses import dataclass
from pathlib import Path

from assets.cli import datasets, evaluate, ingest, label, train
from assets.cli.checks import exit_on_check_errors
from assets.cli.flags import add_field_flag
from assets.cli.output import print_table
from assets.cli.progress import new_bar
from assets.cli.runtime import materialize, open_instance, open_store, require_success
from pipeline import duck
from pipeline.datasets import SplitConfig
from pipeline.engine import find_stockfish
from pipeline.ingest import IngestConfig
from pipeline.selfplay import SelfPlayConfig, play_games
from pipeline.store import Store

DEMO_SPLIT = SplitConfig(val_fraction=0.2, test_fraction=0.2)
"""The sample is small: a fifth of its games each for val and test, so neither is empty."""
REAL_SPLIT = SplitConfig(val_fraction=0.1, test_fraction=0.2)
"""Real games: a fifth of them for test, so that the accuracies are measured on thousands of positions."""
DEMO_ARCHIVES = "ficsgamesdb_2024*_standard2000_*.pgn*"
"""The real archives of the demo in the data folder: FICS standard games averaging over 2000,
January to April 2024 (4,177 games, 348,484 positions)."""
SHARED_PGN = Path(__file__).resolve().parents[3] / "shared" / "data" / "pgn"
"""../shared/data/pgn beside the project, where the shared archives are."""
DEMO_DATASET = "sabatelli_3class"
DEMO_LABELS = 150_000
"""Positions of the real games the demo labels with Stockfish's static evaluation: about 75 s on
2 cores, in which depth-8 labels (Sabatelli's) get about 15,000 done, too few for the network
to learn anything beyond the majority class (README, Training)."""


@dataclass(frozen=True)
class DemoConfig:
    data: str = str(SHARED_PGN)
    """Folder of real archives: a store without archives links the FICS standard 2024 ones
    (ficsgamesdb_2024*_standard2000_*) and reads them in place; without them the demo makes a
    self-play sample."""
    labels: int = DEMO_LABELS
    """Positions of the real games labelled with Stockfish's static evaluation, game by game (0: every one)."""


def real_archives(folder: Path) -> list[Path]:
    """The demo's real archives in folder (none when it is missing)."""
    return sorted(folder.glob(DEMO_ARCHIVES)) if folder.is_dir() else []


def verdict(accuracy: float, majority: float, material: float, rows: int) -> str:
    """One line: the network's test accuracy beside both baselines, and whether it beats them by
    more than the noise (the 95% interval of a difference of two accuracies on `rows` positions)."""
    best = max(majority, material)
    noise = 1.96 * (2 * best * (1 - best) / rows) ** 0.5 if rows else float("inf")
    lead = accuracy - best
    if lead > noise:
        said = "it has learnt more than material"
    elif lead > -noise:
        said = "within noise of the better baseline: it has learnt little beyond it"
    elif accuracy - majority > noise:
        said = (
            "it beats the majority class but has not learnt material yet: the bitmap input needs far more "
            "positions than a demo labels (README, Training)"
        )
    else:
        said = "it has learnt nothing beyond the majority class: too few positions"
    return (
        f"demo result: the 3-class network scores {accuracy:.2%} on {rows:,} test positions of games it never saw; "
        f"majority class {majority:.2%}, material rule {material:.2%} (+/-{noise:.2%} noise): {said}"
    )


def make_sample(store: Store, games: int) -> None:
    """A sample archive by Stockfish self-play in the store's archives folder."""
    out = store.archives_dir / "selfplay-sample.pgn"
    print(f"no archives in {store.archives_dir}: making a sample archive by Stockfish self-play ({games} games)")
    bar = new_bar("self-play", "game", games)
    try:
        play_games(find_stockfish(), out, SelfPlayConfig(games=games), progress=lambda done, total: bar.update(1))
    finally:
        bar.close()


def cmd_demo(args: argparse.Namespace) -> None:
    from assets.ingest import duckdb_views
    from assets.labels import LabelsConfig
    from assets.resources import StockfishResource
    from assets.training import TrainRunConfig

    store = open_store(args.home)
    instance = open_instance(store)
    sample = False
    if not store.find_archives():
        found = real_archives(Path(args.data))
        if found:
            print(f"no archives in {store.archives_dir}: linking {len(found)} real FICS archives from {args.data}")
            for path in found:
                store.add_archive(path)  # a link: read in place
        else:
            print(f"{args.data} has no {DEMO_ARCHIVES}: the demo runs on a self-play sample instead")
            make_sample(store, args.games)
            sample = True
    keys = sorted(store.find_archives())
    ingest.report(ingest.ingest_archives(store, instance, keys, IngestConfig(workers=args.workers)))
    require_success(materialize([duckdb_views], store, instance), "the DuckDB views")
    # The sample: every position at depth 8. Real games: many static labels (see DEMO_LABELS).
    setting = (
        LabelsConfig(limit="depth", value=8) if sample else LabelsConfig(limit="static", max_positions=args.labels)
    )
    labelled = label.label(store, instance, setting, StockfishResource(workers=args.workers))
    label.print_result(labelled)
    exit_on_check_errors(labelled.check_errors, "demo")
    split = DEMO_SPLIT if sample else REAL_SPLIT
    built = datasets.build_datasets(
        store, instance, [DEMO_DATASET], split=split, label={"label_kind": setting.limit, "label_value": setting.value}
    )
    datasets.print_result(built)
    duck.create_views(store)
    if built.all_empty:
        raise SystemExit(1)
    trained = train.train(store, instance, train.DEFAULT_MODELS, TrainRunConfig(profile="quick", device="auto"))
    train.print_result(trained)
    duck.create_views(store)
    m = trained.models[0].metadata
    result = verdict(m.test_accuracy, m.majority_class_accuracy, m.material_baseline_accuracy, m.rows_test)
    print(result)
    request = evaluate.EvaluationRequest(models=tuple(train.DEFAULT_MODELS), quick=True)
    evaluate.print_result(evaluate.evaluate(store, instance, request))
    print(f"store: {store.root}")
    print_table(duck.query(store, "SELECT * FROM archive_summary"), "table")
    print(
        f'query it: chess-pipeline sql "SELECT source, count(*) FROM games GROUP BY source"  '
        f"or  duckdb -readonly {store.duckdb_path}"
    )
    print(result)  # again, last
    if sample:
        print("(a self-play sample of a few dozen games is too small to learn from: give the demo real archives)")


def add_parser(sub) -> None:
    s = sub.add_parser(
        "demo", help="run the whole asset graph on the store (real FICS games, or a self-play sample, if it has none)"
    )
    add_field_flag(s, DemoConfig, "data", "--data")
    add_field_flag(s, DemoConfig, "labels", "--labels", metavar="N")
    games = "self-play games for the sample archive (default {default})"
    add_field_flag(s, SelfPlayConfig, "games", "--games", help=games)
    workers = "worker processes of ingest and engines of labels (0: one per core; default {default})"
    add_field_flag(s, IngestConfig, "workers", "--workers", help=workers)
    s.set_defaults(func=cmd_demo)
