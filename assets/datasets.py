"""The published systems' training sets: one asset per SQL file in sql/datasets/."""

from dataclasses import fields

import dagster as dg

from assets.config import config_from
from assets.metadata import png_md
from assets.progress import run_progress
from assets.resources import StockfishResource, StoreResource
from pipeline.datasets.datasets import (
    DATASETS,
    SPLITS,
    DatasetStats,
    DeepChessParams,
    DeepChessScoredParams,
    HuiParams,
    LabelSetting,
    LubeckParams,
    PieceValuesParams,
    SabatelliClassSearchParams,
    SabatelliParams,
    SabatelliRegressionParams,
    SabatelliSearchParams,
    SearchEngine,
    SplitConfig,
    build_dataset,
)

GROUP = "datasets"
MIN_LABEL_COVERAGE = 0.99


class DatasetConfig(
    config_from(SplitConfig, name="SplitSettings", rename={"by": "split_by", "guard": "leakage_guard"})
):
    """A dataset's run config: the split (pipeline.datasets.datasets.SplitConfig's fields, `by` as
    `split_by` and `guard` as `leakage_guard`), then the set's SQL parameters (its
    DatasetSpec.params dataclass's fields, the same names and defaults)."""

    def split(self) -> SplitConfig:
        return self.to_dataclass(SplitConfig)

    def params(self) -> dict:
        return self.model_dump(exclude=set(DatasetConfig.model_fields))


def _config(params: type, name: str, base: type = DatasetConfig) -> type:
    return config_from(
        params, name=name, base=base, names=[f.name for f in fields(params) if f.name not in base.model_fields]
    )


LabelSettingConfig = _config(LabelSetting, "LabelSettingConfig")
SabatelliConfig = _config(SabatelliParams, "SabatelliConfig", LabelSettingConfig)
SabatelliRegressionConfig = _config(SabatelliRegressionParams, "SabatelliRegressionConfig", SabatelliConfig)
SabatelliSearchConfig = _config(SabatelliSearchParams, "SabatelliSearchConfig")
SabatelliClassSearchConfig = _config(SabatelliClassSearchParams, "SabatelliClassSearchConfig")
DeepChessConfig = _config(DeepChessParams, "DeepChessConfig")
DeepChessScoredConfig = _config(DeepChessScoredParams, "DeepChessScoredConfig", LabelSettingConfig)
LubeckConfig = _config(LubeckParams, "LubeckConfig")
HuiConfig = _config(HuiParams, "HuiConfig")
PieceValuesConfig = _config(PieceValuesParams, "PieceValuesConfig", LabelSettingConfig)

CONFIGS = {
    "sabatelli_3class": SabatelliConfig,
    "sabatelli_15class": SabatelliConfig,
    "sabatelli_20class": SabatelliConfig,
    "sabatelli_regression": SabatelliRegressionConfig,
    "sabatelli_regression_search": SabatelliSearchConfig,
    "sabatelli_3class_search": SabatelliClassSearchConfig,
    "deepchess": DeepChessConfig,
    "deepchess_scored": DeepChessScoredConfig,
    "lubeck_wdl": LubeckConfig,
    "hui_checkmate": HuiConfig,
    "piece_values": PieceValuesConfig,
}
"""Each dataset's run config; tests/assets/test_derived_config.py checks that each one's
fields past the split are exactly its DatasetSpec.defaults."""


def coverage_text(coverage: float | None, candidates: int) -> str:
    """'98.50% of 1,234 candidate positions', or 'n/a (0 candidate positions)'."""
    if coverage is None:
        return "n/a (0 candidate positions)"
    return f"{coverage:.2%} of {candidates:,} candidate positions"


def _histogram_md(stats: DatasetStats, classes: int) -> str:
    lines = ["| class | " + " | ".join(SPLITS) + " |", "|---" * (len(SPLITS) + 1) + "|"]
    for c in range(classes):
        lines.append(f"| {c} | " + " | ".join(f"{stats.histogram.get(s, {}).get(c, 0):,}" for s in SPLITS) + " |")
    return "\n".join(lines)


def _coverage(stats: DatasetStats):
    """label_coverage as metadata: a share, or null when there is no candidate to cover."""
    return dg.MetadataValue.null() if stats.label_coverage is None else round(stats.label_coverage, 4)


def _results(name: str, stats: DatasetStats):
    from pipeline.plots import class_bars_png  # matplotlib: not at import (the CLI imports this module)

    spec = DATASETS[name]
    metadata = {
        "rows": sum(stats.rows.values()),
        **{f"rows_{s}": stats.rows[s] for s in SPLITS},
        **{f"removed_by_guard_{s}": stats.removed[s] for s in SPLITS},
        **{f"games_{s}": stats.games.get(s, 0) for s in SPLITS},
        "candidates": stats.candidates,
        "label_coverage": _coverage(stats),
        "path": dg.MetadataValue.path(stats.folder),
    }
    if stats.empty_reason:
        metadata["empty_reason"] = dg.MetadataValue.text(stats.empty_reason)
    if spec.search:
        metadata["searched_by_round"] = dg.MetadataValue.json(stats.searched)
        metadata["searched_unlabelled"] = stats.searched_unlabelled
    if spec.classes:
        metadata["class_histogram"] = dg.MetadataValue.md(_histogram_md(stats, spec.classes))
        metadata["class_shares"] = png_md(class_bars_png(stats.histogram, spec.classes, name), "class shares")
    else:
        metadata["target"] = dg.MetadataValue.md(
            "| split | mean | std | min | max |\n|---|---|---|---|---|\n"
            + "\n".join(
                f"| {s} | " + " | ".join(f"{v:.4f}" for v in stats.target_summary[s]) + " |"
                for s in SPLITS
                if s in stats.target_summary
            )
        )
    yield dg.MaterializeResult(metadata=metadata)
    yield dg.AssetCheckResult(
        check_name="disjoint_splits",
        passed=not any(stats.overlap.values()),
        metadata={f"shared_keys_{k.replace('/', '_')}": v for k, v in stats.overlap.items()},
    )
    if spec.classes:
        train = stats.histogram.get("train", {})
        missing = [c for c in range(spec.classes) if not train.get(c)]
        total = sum(train.values()) or 1
        yield dg.AssetCheckResult(
            check_name="class_balance",
            passed=not missing,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "classes_missing_in_train": str(missing),
                "smallest_class_share": round(min(train.get(c, 0) for c in range(spec.classes)) / total, 5),
                "largest_class_share": round(max(train.values(), default=0) / total, 5),
            },
        )
    else:
        mean, std, lo, hi = stats.target_summary.get("train", (0.0, 0.0, 0.0, 0.0))
        yield dg.AssetCheckResult(
            check_name="class_balance",
            passed=std > 0,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"train_target_mean": mean, "train_target_std": std},
        )
    yield dg.AssetCheckResult(
        check_name="label_coverage",
        passed=(stats.label_coverage or 0.0) >= MIN_LABEL_COVERAGE,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "label_coverage": _coverage(stats),
            "candidates": stats.candidates,
            "unlabelled_rows_left_out": stats.unlabelled,
            **({"empty_reason": dg.MetadataValue.text(stats.empty_reason)} if stats.empty_reason else {}),
        },
    )
    yield dg.AssetCheckResult(
        check_name="rows_per_split",
        passed=all(stats.rows[s] > 0 for s in SPLITS),
        metadata={s: stats.rows[s] for s in SPLITS},
    )
    if spec.search:
        asked = sum(stats.searched) + stats.searched_unlabelled
        yield dg.AssetCheckResult(
            check_name="searched_children_labelled",
            passed=stats.searched_unlabelled == 0,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "searched_unlabelled": stats.searched_unlabelled,
                "searched_children": asked,
                "unlabelled_share": round(stats.searched_unlabelled / asked, 6) if asked else 0.0,
            },
        )


def dataset_asset(name: str) -> dg.AssetsDefinition:
    spec = DATASETS[name]
    config_cls = CONFIGS[name]
    deps = ["games", "positions"] + (["labels"] if spec.labelled else [])
    checks = [
        dg.AssetCheckSpec("disjoint_splits", asset=name, description="no position key in two splits"),
        dg.AssetCheckSpec(
            "class_balance", asset=name, description="every class present in train (regression: the target varies)"
        ),
        dg.AssetCheckSpec(
            "label_coverage",
            asset=name,
            description=f"at least {MIN_LABEL_COVERAGE:.0%} of candidate positions have a label (none to cover fails)",
        ),
        dg.AssetCheckSpec("rows_per_split", asset=name, description="train, val and test are not empty"),
    ]
    if spec.search:
        checks.append(
            dg.AssetCheckSpec(
                "searched_children_labelled",
                asset=name,
                description="every searched child got Stockfish's evaluation (one the engine failed on after the "
                "pool's retries is left out of train: warns, with how many)",
            )
        )

    def build(context: dg.AssetExecutionContext, config, store: StoreResource, engine: SearchEngine | None = None):
        from pipeline.labels.engine import EngineError

        try:
            stats = build_dataset(store.get(), name, config.params(), config.split(), engine=engine)
        except ValueError as e:  # settings the set refuses (a search set: labels of another kind or engine)
            raise dg.Failure(str(e) if str(e).startswith(name) else f"{name}: {e}") from None
        except EngineError as e:  # a search set's engines could not be kept going: its files stay as they were
            raise dg.Failure(f"{name}: {e} (the dataset's files were not changed)") from None
        context.log.info(
            f"{name}: rows {stats.rows}, removed by the leakage guard {stats.removed}, "
            f"label coverage {coverage_text(stats.label_coverage, stats.candidates)}"
            + (f", searched children added by round {stats.searched}" if spec.search else "")
        )
        if stats.empty_reason:
            context.log.info(f"{name} has no rows: {stats.empty_reason}")
        yield from _results(name, stats)

    asset = dg.asset(
        name=name,
        group_name=GROUP,
        deps=deps,
        check_specs=checks,
        description=f"{spec.description}. SQL: `sql/datasets/{spec.sql or name}.sql`"
        + ("; the children by pipeline/datasets/search_positions.py" if spec.search else "")
        + f"; files `datasets/{name}/{{train,val,test}}.parquet`.",
    )
    if not spec.search:

        @asset
        def _dataset(context: dg.AssetExecutionContext, config: config_cls, store: StoreResource):
            yield from build(context, config, store)

        return _dataset

    @asset
    def _searched(
        context: dg.AssetExecutionContext, config: config_cls, store: StoreResource, stockfish: StockfishResource
    ):
        engine = SearchEngine(stockfish.pool, context.log.info, lambda what: run_progress(context, what).set)
        yield from build(context, config, store, engine)

    return _searched


dataset_assets = [dataset_asset(name) for name, spec in DATASETS.items() if not spec.search]
"""The datasets built by their SQL alone (the store is their only resource)."""
searched_dataset_assets = [dataset_asset(name) for name, spec in DATASETS.items() if spec.search]
"""The datasets whose train split grows by searched children (Stockfish labels them: they need the
`stockfish` resource too)."""
