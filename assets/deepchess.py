"""DeepChess's own figures: the training run's baseline and curves, and its two experiments.

The model asset `deepchess_net` is one of assets.training's (the shared loop trains it); its
evaluation assets are the generic eval_suites_deepchess_net / eval_matches_deepchess_net (the
1-ply comparison player: STS points, matches, Elo) and, here, `eval_pairs_deepchess_net`: Experiment 1
(pair accuracy by Stockfish static-evaluation bucket, suite `deepchess_pairs`) and the STS
"solution ranking" of Experiment 2. Its published-split copy (`published_split_deepchess_net`,
assets.reproduce) gets the same evaluation, `eval_pairs_published_split_deepchess_net`, with its
rows under that model name: the published protocol's figures.
"""

import dagster as dg

from assets.config import DescribedConfig
from assets.metadata import md_cell
from assets.resources import StockfishResource, StoreResource
from assets.shared import EVALUATION_GROUP as GROUP
from assets.shared import (
    MODEL_TAG,
    REPRODUCTION_GROUP,
    SPLIT_MODELS,
    checkpoint_of,
    report_dir,
    rows_md,
    suites_folder,
)
from pipeline.play.evaluation import write_results
from pipeline.research.intervals import PAIR_GAMES
from pipeline.research.published import DEEPCHESS, DEEPCHESS_BUCKETS, DEEPCHESS_MODEL, PAIRS_ON_PUBLISHED_SPLIT
from pipeline.research.reproduction import on_published_split
from pipeline.store.store_files import atomic_path

MODEL = DEEPCHESS_MODEL
"""The model asset (its dataset is the asset `deepchess`)."""
SUITE = "deepchess_pairs"


class PairsConfig(DescribedConfig):
    max_pairs: int = 100_000
    """Most pairs per bucket (each test position at most once per bucket)."""
    engine: bool = True
    """Ask Stockfish (`eval`, not stored) for the static evaluation of test positions the store
    has no static label for; false: only `chess-pipeline label --static`'s labels."""
    suites_dir: str = ""
    """Folder of .epd files for the STS solution ranking; empty: CHESS_PIPELINE_SUITES, else the
    store's `suites` folder."""
    seed: int = 0
    """Seed of the pairs drawn in each bucket."""


def pairs_eval_asset(model: str, group: str = GROUP) -> dg.AssetsDefinition:
    """eval_pairs_<model>: Experiment 1 and the STS solution ranking of a DeepChess model asset
    (`deepchess_net`, or its published-split copy), on the test split that model was trained beside."""
    published_split = model != MODEL
    protocol = (
        f"its published split (positions split one by one, no leakage guard; {PAIRS_ON_PUBLISHED_SPLIT})"
        if published_split
        else "ours (split by game, leakage guard)"
    )

    @dg.asset(
        name=f"eval_pairs_{model}",
        group_name=group,
        deps=[model],
        tags={MODEL_TAG: model},
        description=f"DeepChess Experiment 1 for {model} (test-split pair accuracy by Stockfish static-evaluation "
        f"bucket, suite deepchess_pairs) and the STS solution ranking of Experiment 2, beside the published "
        f"figures; test split: {protocol}.",
    )
    def _pairs(
        context: dg.AssetExecutionContext, config: PairsConfig, store: StoreResource, stockfish: StockfishResource
    ) -> dg.MaterializeResult:
        return evaluate_pairs(context, model, config, store, stockfish)

    return _pairs


def evaluate_pairs(
    context: dg.AssetExecutionContext,
    model_key: str,
    config: PairsConfig,
    store: StoreResource,
    stockfish: StockfishResource,
) -> dg.MaterializeResult:
    from pipeline.datasets.datasets import built_with
    from pipeline.play.deepchess_eval import static_evals
    from pipeline.play.evaluation import load_suites, suite_files
    from pipeline.play.suites import is_sts
    from pipeline.research.intervals import interval_rows, interval_text
    from pipeline.store import storage
    from training.checkpoints import store_location
    from training.data import LoaderConfig
    from training.deepchess import (
        ADVANTAGE_CP,
        EVEN_CP,
        Comparator,
        PairBatches,
        bucket_accuracy,
        load_comparator,
        solution_ranking,
    )
    from training.encoders import get_encoder

    st = store.get()
    model, ck = load_comparator(checkpoint_of(context, model_key))
    comparator = Comparator(model, get_encoder(ck["encoder"]["name"]))
    test = store_location(ck["dataset"]["splits"]["test"]["path"])  # the split it was tested on (lineage)
    if not storage.exists(test):
        raise dg.Failure(
            f"{test}: the test split {model_key} was trained beside is gone; rebuild the dataset and retrain"
        )
    test = storage.local_file(test)  # an S3 store's: a cached copy
    pairs = PairBatches(test, LoaderConfig(batch_size=4096, shuffle=False))
    static = static_evals(st, test, pairs.positions_rows, stockfish.pool if config.engine else None)
    context.log.info(
        f"static evaluations of {pairs.positions_rows:,} test positions: {static.from_labels:,} from labels, "
        f"{static.from_engine:,} from the engine now, {static.missing:,} none (in check)"
    )
    buckets = bucket_accuracy(comparator, pairs, static.cp, config.max_pairs, config.seed)
    rows, intervals = [], {}
    for name, b in buckets.items():
        acc, n = DEEPCHESS_BUCKETS[name]
        intervals[name] = lo, hi = b.interval(config.seed)
        rows.append(
            (
                SUITE,
                name,
                b.accuracy if b.pairs else 0.0,
                b.pairs,
                interval_text(f"{b.accuracy if b.pairs else 0.0:.2%}", f"{lo:.2%}", f"{hi:.2%}", b.pairs)
                + f" ({PAIR_GAMES}); positions: {b.left_positions:,} from White wins, "
                f"{b.right_positions:,} from Black wins; published {acc:.2%} over {n:,} pairs",
            )
        )
        rows += interval_rows(SUITE, name, lo, hi, b.pairs, PAIR_GAMES)
    rows.append(
        (
            SUITE,
            "static_evals",
            static.from_labels + static.from_engine,
            pairs.positions_rows,
            f"even |eval| <= {EVEN_CP} cp, advantage >= {ADVANTAGE_CP} cp; {static.from_labels:,} from static "
            f"labels, {static.from_engine:,} asked of Stockfish now, {static.missing:,} none (in check)",
        )
    )
    split = built_with(test).get("split", {})
    by, guard = split.get("by", "game"), split.get("guard", True)
    detail = f"test split by {by}, leakage guard {'on' if guard else 'off'}"
    if by == "position":
        detail += f"; {PAIRS_ON_PUBLISHED_SPLIT}"
    rows.append((SUITE, "split_by_position", float(by == "position"), pairs.positions_rows, detail))
    rows.append((SUITE, "leakage_guard", float(guard), pairs.positions_rows, detail))
    folder = suites_folder(config.suites_dir, st)
    suites, _ = load_suites(suite_files(folder) if folder.is_dir() else [])
    for s in suites:
        if not is_sts(s.positions):
            continue
        ok, n = solution_ranking(comparator, s.positions)
        acc, pub_n = DEEPCHESS["sts_solution_ranking"]
        rows.append(
            (s.name, "solution_ranking", ok / n if n else 0.0, n, f"published {acc:.2%} over {pub_n:,} positions")
        )
        context.log.info(f"{s.name}: solution ranking {ok}/{n}")
    write_results(st, f"eval_pairs_{model_key}", context.run.run_id, [(model_key, *r) for r in rows])
    table = rows_md(rows)
    report = report_dir(st, model_key) / "pairs.md"
    with atomic_path(report) as tmp:
        tmp.write_text(table + "\n")
    return dg.MaterializeResult(
        metadata={
            "results": dg.MetadataValue.md(table),
            "test_positions": pairs.positions_rows,
            "static_from_labels": static.from_labels,
            "static_from_engine": static.from_engine,
            "buckets": dg.MetadataValue.md(
                "| bucket | ours | 95% (by game) | pairs | published | published pairs |\n|---|---|---|---|---|---|\n"
                + "\n".join(
                    f"| {md_cell(k)} | {b.accuracy:.2%} | {intervals[k][0]:.2%}-{intervals[k][1]:.2%} | {b.pairs:,} "
                    f"| {DEEPCHESS_BUCKETS[k][0]:.2%} | {DEEPCHESS_BUCKETS[k][1]:,} |"
                    for k, b in buckets.items()
                )
            ),
            "bucket_intervals": dg.MetadataValue.json(
                {k: {"n": b.pairs, "low95": intervals[k][0], "high95": intervals[k][1]} for k, b in buckets.items()}
            ),
            "path": dg.MetadataValue.path(str(report)),
        }
    )


eval_pairs_deepchess_net = pairs_eval_asset(MODEL)
deepchess_assets = [eval_pairs_deepchess_net]
if MODEL in SPLIT_MODELS:  # its published-split copy (assets.reproduce), evaluated the same way
    deepchess_assets.append(pairs_eval_asset(on_published_split(MODEL), REPRODUCTION_GROUP))
