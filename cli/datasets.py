"""`chess-pipeline datasets [NAME...]`: the training sets of sql/datasets/, split train/val/test."""

import argparse
import sys
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from assets.records import DatasetMetadata
from cli.flags import add_field_flag, add_limit_flags, limit_from_args
from cli.runtime import materializations, materialize, open_instance, open_store, require_success
from pipeline.datasets.datasets import DATASETS, SplitConfig
from pipeline.settings import add_arguments, field_docs, from_namespace
from pipeline.store import duck
from pipeline.store.store import Store


@dataclass(frozen=True)
class DatasetSummary:
    name: str
    metadata: DatasetMetadata
    checks_failed: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.metadata.rows

    def line(self) -> str:
        from assets.datasets import coverage_text

        m = self.metadata
        rows = ", ".join(f"{s} {n:,}" for s, n in m.split_rows().items())
        removed = ", ".join(f"{s} {n:,}" for s, n in m.removed_by_guard().items())
        searched = m.searched_by_round
        return (
            f"{self.name}: {rows} (leakage guard removed {removed}); label coverage "
            f"{coverage_text(m.label_coverage, m.candidates)}"
            + (
                f"; searched children added to train, round by round: {', '.join(f'{n:,}' for n in searched)}"
                if searched
                else ""
            )
            + (
                f" ({m.searched_unlabelled:,} left out without an evaluation)"
                if searched and m.searched_unlabelled
                else ""
            )
            + (f"; checks not passed: {', '.join(self.checks_failed)}" if self.checks_failed else "")
        )

    def empty_line(self) -> str:
        return (
            f"chess-pipeline datasets: {self.name} has no rows: "
            f"{self.metadata.empty_reason or 'see its checks in the UI'}"
        )


@dataclass(frozen=True)
class DatasetsResult:
    datasets: list[DatasetSummary]

    @property
    def all_empty(self) -> bool:
        return all(d.empty for d in self.datasets)


def takes_labels(name: str) -> bool:
    return "label_kind" in DATASETS[name].defaults


def takes_min_elo(name: str) -> bool:
    return "min_elo" in DATASETS[name].defaults


def check_request(names: list[str], label: dict[str, Any], min_elo: int | None = None) -> list[str]:
    """The datasets asked for (default: all but the searched ones, which label with Stockfish and
    are built when named), or SystemExit naming an unknown one, a label setting given to datasets
    built from the games alone, a rating floor (--min-elo) given only to datasets without one or
    below 0, a searched one given labels other than static, or no Stockfish for a searched one."""
    from pipeline.labels.uci import EngineNotFound, find_stockfish

    names = names or [n for n, spec in DATASETS.items() if not spec.search]
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise SystemExit(f"chess-pipeline datasets: no dataset {', '.join(unknown)}; known: {', '.join(DATASETS)}")
    if label and not any(takes_labels(n) for n in names):
        raise SystemExit(
            f"chess-pipeline datasets: {', '.join(names)} {'takes' if len(names) == 1 else 'take'} no "
            f"label setting (built from the games alone); the label flags (--depth, --nodes, --static, "
            f"--label-engine) are for "
            f"{', '.join(n for n in DATASETS if takes_labels(n))}"
        )
    if min_elo is not None and min_elo < 0:
        raise SystemExit(f"chess-pipeline datasets: --min-elo must be 0 (every game) or more, got {min_elo}")
    if min_elo is not None and not any(takes_min_elo(n) for n in names):
        raise SystemExit(
            f"chess-pipeline datasets: {', '.join(names)} {'has' if len(names) == 1 else 'have'} no rating "
            f"floor (min_elo); --min-elo is for {', '.join(n for n in DATASETS if takes_min_elo(n))}"
        )
    searched = [n for n in names if DATASETS[n].search]
    if searched and label.get("label_kind", "static") != "static":
        raise SystemExit(
            f"chess-pipeline datasets: {', '.join(searched)} {'is' if len(searched) == 1 else 'are'} built on "
            "static labels only (its searched children are labelled by Stockfish's static eval): give "
            "--static, or no label setting"
        )
    if searched:
        try:
            find_stockfish()
        except EngineNotFound as e:
            raise SystemExit(f"chess-pipeline datasets: {', '.join(searched)} labels with Stockfish: {e}") from None
    return names


def build_datasets(
    store: Store,
    instance: dg.DagsterInstance,
    names: list[str] | None = None,
    split: SplitConfig | None = None,
    label: dict[str, Any] | None = None,
    workers: int = 0,
    min_elo: int | None = None,
) -> DatasetsResult:
    """One Dagster run materialising the datasets named (default: all but the searched ones),
    each with its config class's defaults, the `split` and, for those built from labels, the `label` setting
    (label_kind, label_value, label_engine: LabelSetting's fields) over them; `min_elo` (None: each
    set's default) is the rating floor of those that have one."""
    from assets.config import sources
    from assets.datasets import CONFIGS, DatasetConfig, dataset_assets, searched_dataset_assets
    from assets.resources import StockfishResource

    names = check_request(names or [], label or {}, min_elo)
    fields = dict(sources(DatasetConfig))[SplitConfig]  # {config field: SplitConfig field}
    split_fields = {key: getattr(split or SplitConfig(), name) for key, name in fields.items()}
    ops = {
        n: CONFIGS[n](
            **split_fields,
            **((label or {}) if takes_labels(n) else {}),
            **({"min_elo": min_elo} if min_elo is not None and takes_min_elo(n) else {}),
        )
        for n in names
    }
    result = require_success(
        materialize(
            [*dataset_assets, *searched_dataset_assets],
            store,
            instance,
            selection=names,
            ops=ops,
            stockfish=StockfishResource(workers=workers),  # a searched set's engines
        ),
        "datasets",
    )
    failed: dict[str, list[str]] = {}
    for e in result.get_asset_check_evaluations():
        if not e.passed:
            failed.setdefault(e.asset_key.to_user_string(), []).append(e.check_name)
    return DatasetsResult(
        [DatasetSummary(n, DatasetMetadata.read(m), failed.get(n, [])) for n, m in materializations(result).items()]
    )


def print_result(result: DatasetsResult) -> None:
    for d in result.datasets:
        if d.empty:
            print(d.empty_line(), file=sys.stderr)
        else:
            print(d.line())


def label_setting(args: argparse.Namespace) -> dict[str, Any]:
    """The dataset config's label fields the label flags set (--depth N / --nodes N / --static,
    --label-engine NAME; {} when none is given)."""
    limit = limit_from_args(args, "datasets")
    setting = {} if limit is None else {"label_kind": limit.kind, "label_value": limit.value}
    if getattr(args, "label_engine", None) is not None:
        setting["label_engine"] = args.label_engine
    return setting


SPLIT_FLAGS = ["seed", "val_fraction", "test_fraction"]
"""SplitConfig's fields that are flags of their own name (`by` is --split-by, `guard` --no-leakage-guard)."""


def split_setting(args: argparse.Namespace) -> SplitConfig:
    """The split the flags ask for (checked: the fractions leave room for train)."""
    return from_namespace(SplitConfig, args, names=SPLIT_FLAGS, by=args.split_by, guard=args.leakage_guard)


def cmd_datasets(args: argparse.Namespace) -> None:
    label = label_setting(args)
    names = check_request(args.names, label, args.min_elo)  # before the store is made: a typo makes none
    split = split_setting(args)
    store = open_store(args.home)
    instance = open_instance(store)
    result = build_datasets(store, instance, names, split, label, args.workers, args.min_elo)
    print_result(result)
    duck.create_views(store)
    if result.all_empty:  # nothing useful built
        raise SystemExit(1)


def _add_label_flags(parser: argparse.ArgumentParser) -> None:
    """--depth N / --nodes N / --static (the labels of `label` with the same flags) and
    --label-engine NAME: the fields of pipeline.datasets.datasets.LabelSetting, their help and defaults
    taken from it."""
    from pipeline.datasets.datasets import LabelSetting, setting_text

    default = LabelSetting()
    docs = field_docs(LabelSetting)
    takers = ", ".join(n for n, spec in DATASETS.items() if "label_kind" in spec.defaults and not spec.search)
    searched = ", ".join(n for n, spec in DATASETS.items() if spec.search)
    g = parser.add_argument_group(
        "label setting",
        f"{docs['label_kind']} Default: {setting_text(default.label_kind, default.label_value)}. "
        f"For the datasets built from labels: {takers}; and {searched}, static only.".replace("%", "%%"),
    )
    add_limit_flags(g, lambda kind: "the labels `label` made with the same flag")
    g.add_argument(
        "--label-engine",
        metavar="NAME",
        help=docs["label_engine"].replace("%", "%%")
        + (f" Default: {default.label_engine!r}." if default.label_engine else ""),
    )


def add_parser(sub) -> None:
    s = sub.add_parser("datasets", help="materialise training sets (sql/datasets/) with train/val/test splits")
    s.add_argument(
        "names",
        nargs="*",
        help="datasets to build (default: all but "
        + ", ".join(n for n, spec in DATASETS.items() if spec.search)
        + ", built when named)",
    )
    add_arguments(s, SplitConfig, names=SPLIT_FLAGS)
    s.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="Stockfish processes labelling a searched set's children, and processes drawing them "
        "(default 0: one per usable core)",
    )
    add_field_flag(s, SplitConfig, "by", "--split-by", dest="split_by")
    add_field_flag(
        s,
        SplitConfig,
        "guard",
        "--no-leakage-guard",
        dest="leakage_guard",
        action="store_false",
        help="keep test and val positions in train (for comparison with the published splits)",
    )
    floors = ", ".join(f"{n} {spec.defaults['min_elo']}" for n, spec in DATASETS.items() if takes_min_elo(n))
    s.add_argument(
        "--min-elo",
        type=int,
        metavar="N",
        help=f"rating floor of the sets that have one: both players rated over N (engine games always in); default: "
        f"each set's own ({floors})",
    )
    _add_label_flags(s)
    s.set_defaults(func=cmd_datasets)
