"""`chess-pipeline demo`: the whole asset graph on the store: ingest, views, labels, the 3-class
dataset, training, a quick evaluation. A store with no archives gets real games first (the
FICS archives of ../shared/data/pgn, linked and read in place), or, on a machine without them,
a self-play sample (too small to learn from: the demo says so); a store with no EPD suites gets
those of ../shared/data/epd (STS, Kaufman's test), linked the same way, so the evaluation scores
them. It calls the other commands' services, as a script would, and ends with the network's test
accuracy beside the majority class and the material rule on the same test positions."""

import argparse
from dataclasses import dataclass
from pathlib import Path

from cli import datasets, evaluate, ingest, label, train
from cli.checks import exit_on_check_errors
from cli.flags import SHARED_EPD, SHARED_PGN, add_field_flag
from cli.output import print_table
from cli.progress import new_bar
from cli.runtime import materialize, open_instance, open_store, require_success
from pipeline.datasets.datasets import SplitConfig
from pipeline.ingest.ingest import IngestConfig
from pipeline.ingest.sample_archive import SampleArchiveConfig, play_games
from pipeline.labels.uci import find_stockfish
from pipeline.store import duck
from pipeline.store.store import Store

DEMO_SPLIT = SplitConfig(val_fraction=0.2, test_fraction=0.2)
"""The sample is small: a fifth of its games each for val and test, so neither is empty."""
REAL_SPLIT = SplitConfig(val_fraction=0.1, test_fraction=0.2)
"""Real games: a fifth of them for test, so that the accuracies are measured on thousands of positions."""
DEMO_ARCHIVES = "ficsgamesdb_2024*_standard2000_*.pgn*"
"""The real archives of the demo in the data folder: FICS standard games averaging over 2000,
January to April 2024 (4,177 games, 348,484 positions)."""
DEMO_DATASET = "sabatelli_3class"
DEMO_MODEL = "mlp_counts_3class"
"""The network the demo trains (assets.training): a small MLP over the 12 piece counts, a material
evaluation learnt from the labels. On the demo's 1,441 training games it beats the material rule
beyond the noise, where the thesis's 3-class MLP on the bits (`mlp_bitmap_3class`) ends below it
and the counts beside the bits (`mlp_material_3class`) add nothing measurable (README, Training)."""
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
    suites: str = str(SHARED_EPD)
    """Folder of EPD suites: a store whose suites folder holds none links this folder's .epd files
    (read in place), so the evaluation scores them."""


def real_archives(folder: Path) -> list[Path]:
    """The demo's real archives in folder (none when it is missing)."""
    return sorted(folder.glob(DEMO_ARCHIVES)) if folder.is_dir() else []


def link_suites(store: Store, folder: Path) -> list[Path]:
    """Link folder's .epd files into the store's suites folder when the evaluation would find no
    suite there; the links made. Nothing when the store has suites of its own, when
    CHESS_PIPELINE_SUITES names the folder the evaluation reads instead (not the store's to
    fill), or on an S3 store (a link there is no file)."""
    from assets.evaluation import local_suite_files
    from assets.shared import suites_folder
    from pipeline.play.evaluation import suite_files

    target = suites_folder("", store)
    if target != store.root / "suites" or not isinstance(target, Path) or local_suite_files(target):
        return []
    found = suite_files(folder) if folder.is_dir() else []
    if not found:
        return []
    target.mkdir(parents=True, exist_ok=True)
    links = []
    for suite in found:
        link = target / suite.name
        link.symlink_to(suite.resolve())
        links.append(link)
    return links


def verdict(accuracy: float, majority: float, material: float, rows: int, leads: dict[str, float] | None = None) -> str:
    """One line: the network's test accuracy beside both baselines, and whether it beats them by
    more than the noise. `leads`: the run's leads over the baselines on the same rows and the
    half-widths of their 95% intervals, paired and clustered by the test rows' games where
    `lead_clusters` says how many (0: no game grouping, per position) (newest_leads,
    training.train.baseline_leads); without them, the interval of a difference of two independent
    accuracies on `rows` positions (which takes every position for an independent one)."""
    better = "material" if material >= majority else "majority"
    leads = leads or {}
    if f"{better}_lead" in leads and f"{better}_lead_ci95" in leads:
        lead, noise = leads[f"{better}_lead"], leads[f"{better}_lead_ci95"]
        clusters = int(leads.get("lead_clusters", 0))
        grouping = f"clustered by the {clusters:,} test games" if clusters else "per position (no game grouping)"
        which = "material" if better == "material" else "the majority class"
        noted = f"; lead over {which} {lead:+.2%}, its 95% interval +/-{noise:.2%} (paired, {grouping})"
    else:
        best = max(majority, material)
        noise = _independent_noise(best, rows)
        lead = accuracy - best
        noted = f" (+/-{noise:.2%} noise)"
    if "majority_lead" in leads and "majority_lead_ci95" in leads:
        over_majority, majority_noise = leads["majority_lead"], leads["majority_lead_ci95"]
    else:
        over_majority, majority_noise = accuracy - majority, _independent_noise(majority, rows)
    if lead > noise:
        said = "it has learnt more than material"
    elif lead > -noise:
        said = "within noise of the better baseline: it has learnt little beyond it"
    elif over_majority > majority_noise:
        said = (
            "it beats the majority class but has not learnt material yet (README, Training: why the 3-class MLP "
            "learns little beyond material on small data)"
        )
    else:
        said = "it has learnt nothing beyond the majority class: too few positions"
    return (
        f"demo result: the 3-class network scores {accuracy:.2%} on {rows:,} test positions of games it never saw; "
        f"majority class {majority:.2%}, material rule {material:.2%}{noted}: {said}"
    )


def _independent_noise(accuracy: float, rows: int) -> float:
    """Half-width of the 95% interval of a difference of two independent accuracies near `accuracy` on `rows` rows."""
    return 1.96 * (2 * accuracy * (1 - accuracy) / rows) ** 0.5 if rows else float("inf")


def newest_leads(store: Store, model: str) -> dict[str, float]:
    """The newest run's leads over the baselines and their intervals (model_metrics, split test:
    majority_lead, material_lead, their _ci95, lead_clusters; training.train.baseline_leads)."""
    rows = duck.query(
        store,
        "SELECT metric, value FROM model_metrics WHERE model = ? AND split = 'test' "
        "AND (metric LIKE '%lead%' OR metric = 'lead_clusters') "
        "QUALIFY materialised_at = max(materialised_at) OVER ()",
        [model],
    ).to_pylist()
    return {r["metric"]: r["value"] for r in rows}


def make_sample(store: Store, games: int) -> None:
    """A sample archive by Stockfish self-play in the store's archives folder."""
    out = store.archives_dir / "selfplay-sample.pgn"
    print(f"no archives in {store.archives_dir}: making a sample archive by Stockfish self-play ({games} games)")
    bar = new_bar("self-play", "game", games)
    try:
        play_games(find_stockfish(), out, SampleArchiveConfig(games=games), progress=lambda done, total: bar.update(1))
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
    if linked := link_suites(store, Path(args.suites)):
        names = ", ".join(p.name for p in linked)
        print(f"no .epd suites in {linked[0].parent}: linking {len(linked)} suite(s) from {args.suites} ({names})")
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
    trained = train.train(store, instance, [DEMO_MODEL], TrainRunConfig(profile="quick", device="auto"))
    train.print_result(trained)
    duck.create_views(store)
    m = trained.models[0].metadata
    leads = newest_leads(store, DEMO_MODEL)
    result = verdict(m.test_accuracy, m.majority_class_accuracy, m.material_baseline_accuracy, m.rows_test, leads)
    print(result)
    request = evaluate.EvaluationRequest(models=(DEMO_MODEL,), quick=True, workers=args.workers or None)
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
    add_field_flag(s, DemoConfig, "suites", "--suites", metavar="FOLDER")
    games = "self-play games for the sample archive (default {default})"
    add_field_flag(s, SampleArchiveConfig, "games", "--games", help=games)
    workers = (
        "worker processes of ingest, engines of labels, processes of the evaluation's searches and games "
        "(0: one per core; default {default})"
    )
    add_field_flag(s, IngestConfig, "workers", "--workers", help=workers)
    s.set_defaults(func=cmd_demo)
