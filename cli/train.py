"""`chess-pipeline train [MODEL...]`: value networks trained from the datasets (model assets)."""

import argparse
import math
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import dagster as dg

from assets.records import ModelMetadata
from cli.flags import add_field_flag, field_facts
from cli.runtime import materializations, materialize, open_instance, open_store, require_success
from pipeline.settings import add_arguments, field_type, flag_name
from pipeline.store import duck
from pipeline.store.store import Store
from training.config import ScheduleOverrides, schedule_problem

DEFAULT_MODELS = ["mlp_bitmap_3class"]
OVERRIDE_FLAGS = {f.name: flag_name(f.name) for f in fields(ScheduleOverrides)}
"""`train`'s flag for each ScheduleOverrides field: its name (--epochs, --max-train-rows, ...)."""


def add_override_flags(parser, flags: dict[str, str], note: str = "") -> None:
    """One flag per ScheduleOverrides field in `flags` ({field: flag}): its docstring as help
    (`note` after it), left out by default (the profile's). Read back by overrides_from_args."""
    for name, flag in flags.items():
        doc, _, _ = field_facts(ScheduleOverrides, name)
        kind = field_type(ScheduleOverrides, name).__args__[0]  # X of `X | None`
        add_field_flag(
            parser,
            ScheduleOverrides,
            name,
            flag,
            dest=f"schedule_{name}",
            type=kind,
            metavar="MIN" if kind is float else "N",
            help=doc + note,
        )


def overrides_from_args(args: argparse.Namespace, command: str, flags: dict[str, str]) -> ScheduleOverrides:
    """The ScheduleOverrides the flags of add_override_flags give; a bad value is one line naming
    its flag (SystemExit), before any store work."""
    given = {name: getattr(args, f"schedule_{name}", None) for name in flags}
    if problem := schedule_problem(given, flags):
        raise SystemExit(f"chess-pipeline {command}: {problem}")
    return ScheduleOverrides(**given)


@dataclass(frozen=True)
class ModelSummary:
    name: str
    metadata: ModelMetadata

    def line(self) -> str:
        m = self.metadata
        score = (
            f"test accuracy {m.test_accuracy:.2%} (majority class {m.majority_class_accuracy:.2%}"
            + (
                f", material rule {m.material_baseline_accuracy:.2%}"
                + (
                    f", lead {m.material_lead:+.2%} +/- {m.material_lead_ci95:.2%})"
                    if m.material_lead is not None and m.material_lead_ci95 is not None
                    else ")"
                )
                if m.material_baseline_accuracy is not None
                else ")"
            )
            if m.test_accuracy is not None
            else f"test MSE {m.test_mse:.5f}"
            + (
                f" (train mean {m.mean_baseline_mse:.5f}, material line {m.material_baseline_mse:.5f}"
                + (
                    f", lead {m.material_line_lead:+.5f} +/- {m.material_line_lead_ci95:.5f})"
                    if m.material_line_lead is not None and m.material_line_lead_ci95 is not None
                    else ")"
                )
                if m.material_baseline_mse is not None
                else ""
            )
            + (f", cp MAE {m.test_cp_mae:.0f}" if m.test_cp_mae is not None and not math.isnan(m.test_cp_mae) else "")
        )
        return (
            f"{self.name}: {score} on {m.rows_test:,} test positions; {m.epochs} epochs on {m.rows_train:,} "
            f"rows in {m.seconds:.0f}s ({m.train_positions_per_second:,} positions/s, {m.device}); "
            f"published: {m.published}"
        )


@dataclass(frozen=True)
class TrainResult:
    models: list[ModelSummary]
    results_table: Path
    """reports/model_results.md: every trained model beside the published figure."""


def check_models(names: list[str]) -> list[str]:
    """The models asked for (default: the 3-class MLP), or SystemExit naming an unknown one."""
    from assets.training import MODELS

    names = names or list(DEFAULT_MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline train: no model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    return names


def check_datasets(store: Store, names: list[str]) -> None:
    """SystemExit, one line per dataset a model needs that is missing or empty, with the fix
    (before Dagster and torch start)."""
    from assets.training import MODELS
    from pipeline.datasets.datasets import dataset_problem

    by_dataset: dict[str, list[str]] = {}
    for n in names:
        by_dataset.setdefault(MODELS[n].dataset, []).append(n)
    problems = [
        f"chess-pipeline train: {', '.join(models)} cannot train: {problem}"
        for dataset, models in by_dataset.items()
        if (problem := dataset_problem(store, dataset))
    ]
    if problems:
        raise SystemExit("\n".join(problems))


def train(store: Store, instance: dg.DagsterInstance, names: list[str] | None = None, config=None) -> TrainResult:
    """Train the models named (default: the 3-class MLP) in one Dagster run with this
    TrainRunConfig (its defaults when None), then the results table."""
    from assets.training import TrainRunConfig, model_assets, model_results

    names = check_models(names or [])
    check_datasets(store, names)
    config = config or TrainRunConfig()
    result = require_success(
        materialize(model_assets, store, instance, selection=names, ops={n: config for n in names}), "training"
    )
    models = [ModelSummary(n, ModelMetadata.read(m)) for n, m in materializations(result).items()]
    require_success(materialize([model_results], store, instance), "the results table")
    return TrainResult(models, store.root / "reports" / "model_results.md")


def print_result(result: TrainResult) -> None:
    for m in result.models:
        print(m.line())
    print(f"results table: {result.results_table}")


def cmd_train(args: argparse.Namespace) -> None:
    from assets.training import TrainRunConfig

    names = check_models(args.models)  # before the store is made
    overrides = overrides_from_args(args, "train", OVERRIDE_FLAGS)  # left out: the profile's
    store = open_store(args.home)
    check_datasets(store, names)
    instance = open_instance(store)
    config = TrainRunConfig(profile=args.profile, device=args.device, **asdict(overrides))
    print_result(train(store, instance, names, config))
    duck.create_views(store)


def add_parser(sub) -> None:
    from assets.training import TrainRunConfig
    from training.config import TrainConfig

    s = sub.add_parser("train", help="train value networks from the datasets (default: the 3-class MLP)")
    s.add_argument("models", nargs="*", help="model assets to train (default: mlp_bitmap_3class)")
    add_field_flag(s, TrainRunConfig, "profile", "--profile")
    add_override_flags(s, OVERRIDE_FLAGS)
    add_arguments(s, TrainConfig, names=["device"])
    s.set_defaults(func=cmd_train)
