"""The assets' run configs and the Stockfish resource are derived from the library's dataclasses
(assets.config.config_from): the same names, types and defaults, the dataclass docstrings as the
launchpad's descriptions, and back to the dataclass with to_dataclass. These tests keep the two
sides from drifting: a field added to, renamed in or re-defaulted in a dataclass shows up in
its config, or fails here."""

import dataclasses
import inspect
from typing import Literal

import dagster as dg
import pytest

from assets.config import DescribedConfig, config_from, sources, to_dataclass
from assets.datasets import CONFIGS, DatasetConfig
from assets.evaluation import MatchesConfig
from assets.ingest import IngestRunConfig
from assets.labels import LabelsConfig
from assets.resources import StockfishResource
from assets.training import TrainRunConfig
from pipeline.datasets.datasets import DATASETS, SplitConfig
from pipeline.ingest.ingest import IngestConfig
from pipeline.labels.pool import EnginePool, EngineSettings
from pipeline.labels.setting import LabelRun
from pipeline.labels.uci import Limit
from pipeline.play.evaluation import EndgameConfig, MatchConfig
from pipeline.settings import field_docs
from training.train import TrainConfig


def defaults_of(config_cls) -> dict:
    return {k: f.default for k, f in config_cls.model_fields.items()}


def test_every_dataset_config_takes_exactly_its_sql_parameters_with_their_defaults():
    assert set(CONFIGS) == set(DATASETS)
    split = list(DatasetConfig.model_fields)
    assert split == ["seed", "val_fraction", "test_fraction", "split_by", "leakage_guard"]
    for name, spec in DATASETS.items():
        config = CONFIGS[name]
        params = {k: v for k, v in defaults_of(config).items() if k not in split}
        defaults = {k: list(v) if isinstance(v, tuple) else v for k, v in spec.defaults.items()}  # config: lists
        assert params == defaults, name
        assert config().params() == defaults, name
        assert config().split() == SplitConfig()


def test_the_dataset_split_fields_are_split_configs_renamed():
    config = DatasetConfig(seed=3, val_fraction=0.2, split_by="position", leakage_guard=False)
    assert config.split() == SplitConfig(seed=3, val_fraction=0.2, test_fraction=0.1, by="position", guard=False)
    assert DatasetConfig.model_fields["leakage_guard"].description == field_docs(SplitConfig)["guard"]


def test_the_stockfish_resource_is_engine_settings_and_the_pool_takes_them():
    assert defaults_of(StockfishResource) == dataclasses.asdict(EngineSettings())
    assert StockfishResource(workers=3, clear_hash=False).settings() == EngineSettings(workers=3, clear_hash=False)
    # EnginePool's parameters: the settings' fields (the binary resolved from `path`), same defaults.
    params = inspect.signature(EnginePool.__init__).parameters
    pool_defaults = {k: p.default for k, p in params.items() if k not in ("self", "path", "batch", "pipeline")}
    assert pool_defaults == {k: v for k, v in dataclasses.asdict(EngineSettings()).items() if k != "path"}


def test_a_pool_from_settings_has_those_settings(stockfish_path_free):
    pool = EnginePool.from_settings(EngineSettings(path=stockfish_path_free, workers=2, hash_mb=32, retries=1))
    assert (pool.path, pool.workers, pool.hash_mb, pool.retries) == (stockfish_path_free, 2, 32, 1)
    assert pool.timeout_s == 60.0  # 0: measured by the labels asset; any other user gets 60 s
    with pytest.raises(ValueError, match="retries 0 or more, got timeout_s=0, retries=-1"):
        StockfishResource(retries=-1).make_pool()


@pytest.fixture
def stockfish_path_free(tmp_path):
    """An executable file standing for the engine: from_settings only resolves the path (the
    pool is not started, so no Stockfish runs)."""
    exe = tmp_path / "stockfish"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    return str(exe)


def test_matches_config_composes_match_and_endgame_configs():
    assert MatchesConfig().to_dataclass(MatchConfig) == MatchConfig()
    assert MatchesConfig().to_dataclass(EndgameConfig) == EndgameConfig()
    config = MatchesConfig(stockfish_skills=[1, 2], endgames=4, endgame_max_plies=60)
    assert config.to_dataclass(MatchConfig).stockfish_skills == (1, 2)  # a list in config, a tuple here
    assert config.to_dataclass(EndgameConfig) == EndgameConfig(positions=4, max_plies=60)
    assert list(MatchesConfig.model_fields)[-4:] == [
        "endgames",
        "endgame_verify_depth",
        "endgame_defender_depth",
        "endgame_max_plies",
    ]
    with pytest.raises(TypeError, match="derives from 2 dataclasses"):
        config.to_dataclass()


def test_ingest_labels_and_train_configs_are_their_dataclasses_fields():
    assert IngestRunConfig().to_dataclass() == IngestConfig()
    assert IngestRunConfig(workers=2).to_dataclass() == IngestConfig(workers=2)
    assert LabelsConfig().to_dataclass(Limit) == Limit()
    assert LabelsConfig(limit="nodes", value=500).to_dataclass(Limit) == Limit("nodes", 500)
    run = LabelsConfig(archives=["a"], order="oldest").to_dataclass(LabelRun)
    assert (run.archives, run.order) == (("a",), "oldest")
    defaults = defaults_of(TrainRunConfig)
    assert {k: defaults[k] for k in ("lr", "seed", "device")} == {
        k: getattr(TrainConfig(), k) for k in ("lr", "seed", "device")
    }
    assert TrainRunConfig(seed=5).to_dataclass(TrainConfig) == TrainConfig(seed=5)


@pytest.mark.parametrize(
    "config_cls",
    [IngestRunConfig, MatchesConfig, StockfishResource, LabelsConfig, TrainRunConfig, *dict.fromkeys(CONFIGS.values())],
    ids=lambda c: c.__name__,
)
def test_each_derived_field_is_described_by_its_dataclass_docstring(config_cls):
    derived = 0
    for dc, mapping in sources(config_cls):
        docs = field_docs(dc)
        for key, name in mapping.items():
            assert config_cls.model_fields[key].description == docs[name], f"{config_cls.__name__}.{key}"
            derived += 1
    assert derived


def test_config_from_maps_tuples_to_lists_and_refuses_an_undocumented_field():
    @dataclasses.dataclass
    class Settings:
        widths: tuple[int, ...] = (64, 32)
        """Hidden widths."""
        kind: Literal["a", "b"] = "a"
        """Which one."""

    config = config_from(Settings, name="SettingsConfig")
    assert config.model_fields["widths"].annotation == list[int]
    assert config().widths == [64, 32]
    assert to_dataclass(config(widths=[8])) == Settings(widths=(8,))
    assert issubclass(config, DescribedConfig)

    @dataclasses.dataclass
    class Bare:
        n: int = 1

    with pytest.raises(ValueError, match=r"Bare: no docstring under field\(s\) n"):
        config_from(Bare)


def test_dagster_takes_a_derived_config_and_refuses_a_misspelled_literal(tmp_path):
    @dataclasses.dataclass
    class Settings:
        widths: tuple[int, ...] = (64, 32)
        """Hidden widths."""
        kind: Literal["alpha", "beta"] = "alpha"
        """Which one."""

    config_cls = config_from(Settings, name="SettingsConfig")
    seen = []

    @dg.asset
    def thing(config: config_cls) -> None:
        seen.append(config.to_dataclass())

    field = thing.op.config_schema.config_type.fields["kind"]
    assert field.description == "Which one."
    assert [v.config_value for v in field.config_type.enum_values] == ["alpha", "beta"]
    run_config = {"ops": {"thing": {"config": {"widths": [1, 2, 3], "kind": "beta"}}}}
    assert dg.materialize([thing], run_config=run_config).success
    assert seen == [Settings(widths=(1, 2, 3), kind="beta")]
    with pytest.raises(dg.DagsterInvalidConfigError, match="not in enum type Literal\\['alpha', 'beta'\\] got bta"):
        dg.materialize([thing], run_config={"ops": {"thing": {"config": {"kind": "bta"}}}})
