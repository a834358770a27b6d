"""Every choice in the assets' run config is a Literal: the launchpad shows it as an enum of the
valid values, Dagster refuses a misspelled one before the run starts (naming the valid values),
and the CLI flag that sets it takes its `choices=` from the same type."""

from typing import get_args

import dagster as dg
import pytest

from assets.datasets import dataset_assets, searched_dataset_assets
from assets.labels import labels, relabel_schedule_from_env
from assets.resources import StockfishResource, StoreResource
from assets.training import MODELS, PROFILES, model_assets
from cli import build_parser, main
from pipeline.datasets.datasets import DATASETS, Pov, SplitBy, TargetKind
from pipeline.labels.setting import Order
from pipeline.labels.uci import LimitKind
from training.choices import Device, Profile
from training.train import TrainConfig

DATASET = {a.key.to_user_string(): a for a in [*dataset_assets, *searched_dataset_assets]}
MODEL = model_assets[0]
CASES = [  # (asset, config field, its type, a misspelling)
    (labels, "limit", LimitKind, "dpeth"),
    (labels, "order", Order, "olds"),
    *((a, "split_by", SplitBy, "gmae") for a in DATASET.values()),
    *((DATASET[n], "label_kind", LimitKind, "nods") for n, s in DATASETS.items() if "label_kind" in s.defaults),
    *((DATASET[n], "pov", Pov, "whtie") for n, s in DATASETS.items() if "pov" in s.defaults),
    *((DATASET[n], "target_kind", TargetKind, "winprob") for n, s in DATASETS.items() if "target_kind" in s.defaults),
    (MODEL, "profile", Profile, "ful"),
    (MODEL, "device", Device, "gpu"),
]
IDS = [f"{a.key.to_user_string()}.{f}" for a, f, _, _ in CASES]


def _field(asset: dg.AssetsDefinition, name: str):
    return asset.op.config_schema.config_type.fields[name]


@pytest.mark.parametrize("asset,name,choice,bad", CASES, ids=IDS)
def test_a_config_choice_is_an_enum_in_the_launchpad(asset, name, choice, bad):
    config_type = _field(asset, name).config_type
    assert config_type.kind.name == "ENUM"
    assert tuple(v.config_value for v in config_type.enum_values) == get_args(choice)
    assert _field(asset, name).default_value in get_args(choice)


@pytest.mark.slow  # a Dagster run per case: 45 s in all (the launchpad test above checks the same schema fast)
@pytest.mark.parametrize("asset,name,choice,bad", CASES, ids=IDS)
def test_dagster_refuses_a_misspelled_config_choice_naming_the_valid_values(asset, name, choice, bad, tmp_path):
    key = asset.key.to_user_string()
    resources = {"store": StoreResource(root=str(tmp_path / "store")), "stockfish": StockfishResource()}
    with pytest.raises(dg.DagsterInvalidConfigError) as e:
        dg.materialize(
            [asset],
            instance=dg.DagsterInstance.ephemeral(),
            resources=resources,
            run_config={"ops": {key: {"config": {name: bad}}}},
        )
    message = str(e.value)
    assert f"{key}:config:{name}" in message and bad in message
    assert all(repr(v) in message for v in get_args(choice))  # "not in enum type Literal['a', 'b'] got x"
    assert not (tmp_path / "store").exists()  # refused before the run started


def test_the_nightly_relabel_order_from_the_environment_is_checked_naming_the_valid_values():
    with pytest.raises(ValueError) as e:
        relabel_schedule_from_env({"CHESS_PIPELINE_RELABEL_ORDER": "olds", "TZ": "UTC"})
    message = str(e.value)
    assert message.startswith("CHESS_PIPELINE_RELABEL_ORDER must be one of") and "'olds'" in message
    assert all(v in message for v in get_args(Order))
    for order in get_args(Order):
        assert f"{order} first" in relabel_schedule_from_env({"CHESS_PIPELINE_RELABEL_ORDER": order}).description


def test_the_training_profiles_are_the_profile_choices():
    assert tuple(PROFILES) == get_args(Profile)


def test_every_model_asset_names_a_known_dataset_preset_and_encoder():
    for m in MODELS.values():
        TrainConfig(dataset=m.dataset, model=m.model, encoder=m.encoder)  # raises, naming the valid ones


def _option(command: str, flag: str):
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices[command]._option_string_actions[flag]


@pytest.mark.parametrize(
    "command,flag,choice,bad",
    [
        ("label", "--order", Order, "olds"),
        ("datasets", "--split-by", SplitBy, "gmae"),
        ("train", "--profile", Profile, "ful"),
        ("train", "--device", Device, "gpu"),
    ],
)
def test_the_cli_refuses_a_misspelled_choice_naming_the_valid_values(
    command, flag, choice, bad, tmp_path, capsys, monkeypatch
):
    assert tuple(_option(command, flag).choices) == get_args(choice)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    with pytest.raises(SystemExit) as e:
        main(["--home", str(tmp_path / "store"), command, flag, bad])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"invalid choice: {bad!r}" in err and all(repr(v) in err for v in get_args(choice))
    assert not (tmp_path / "store").exists()
