"""The label setting is one pipeline.labels.uci.Limit, from the flag to the file path: the same flags in
`label`, `datasets` and `reproduce`, its default declared once (issue 35). Parsing only: no engine,
no store."""

import re
from pathlib import Path

import pytest

from cli.app import build_parser
from pipeline.labels.uci import Limit

ROOT = Path(__file__).resolve().parents[1]


def _label(argv: list[str]) -> Limit:
    from cli.label import config_from_args

    config, _ = config_from_args(build_parser().parse_args(["label", *argv]))
    return Limit(config.limit, config.value)


def _datasets(argv: list[str]) -> Limit | None:
    from cli.datasets import label_setting

    got = label_setting(build_parser().parse_args(["datasets", "sabatelli_3class", *argv]))
    return Limit(got["label_kind"], got["label_value"]) if got else None


def _reproduce(argv: list[str]) -> Limit:
    from cli.flags import limit_from_args
    from cli.reproduce_config import ReproduceConfig

    args = build_parser().parse_args(["reproduce", *argv])
    return limit_from_args(args, "reproduce", ReproduceConfig.label)


@pytest.mark.parametrize("read", [_label, _datasets, _reproduce], ids=["label", "datasets", "reproduce"])
@pytest.mark.parametrize(
    "argv, limit",
    [
        (["--depth", "6"], Limit("depth", 6)),
        (["--nodes", "500"], Limit("nodes", 500)),
        (["--static"], Limit("static")),
    ],
)
def test_every_command_reads_the_label_setting_from_the_same_flags(read, argv, limit):
    assert read(argv) == limit


@pytest.mark.parametrize("command", [["label"], ["datasets", "sabatelli_3class"], ["reproduce"]])
def test_a_bad_label_setting_is_one_line_naming_the_flag(command, capsys):
    from cli.flags import limit_from_args

    args = build_parser().parse_args([*command, "--depth", "0"])
    with pytest.raises(SystemExit) as e:
        limit_from_args(args, command[0])
    assert str(e.value) == f"chess-pipeline {command[0]}: --depth: depth limit must be at least 1, got 0"
    with pytest.raises(SystemExit):  # two settings at once: argparse refuses, as before
        build_parser().parse_args([*command, "--depth", "6", "--static"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_without_a_flag_each_command_takes_the_one_default():
    from assets.labels import LabelsConfig
    from cli.reproduce_config import ReproduceConfig
    from pipeline.datasets.datasets import DATASETS, LabelSetting

    default = Limit()
    assert _label([]) == default and _reproduce([]) == default == ReproduceConfig().label
    assert _datasets([]) is None  # datasets: the set's own default ...
    setting = LabelSetting()
    assert Limit(setting.label_kind, setting.label_value) == default  # ... which is the same one
    labelled = [s for s in DATASETS.values() if "label_kind" in s.defaults and not s.search]
    assert labelled and all(Limit(s.defaults["label_kind"], s.defaults["label_value"]) == default for s in labelled)
    config = LabelsConfig()
    assert Limit(config.limit, config.value) == default


def test_the_documented_default_depth_is_the_declared_one():
    """--help, the sensor's description and the usage pages say the default Limit's depth."""
    from assets.labels import labels_automation

    default = Limit()
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command" or getattr(a, "choices", None) is not None)
    for command in ("label", "reproduce"):
        depth = next(a for a in sub.choices[command]._actions if "--depth" in a.option_strings)
        assert depth.help.endswith(f"(default {default.value})"), (command, depth.help)
    assert f"({default})" in labels_automation.description
    labels_md = (ROOT / "docs" / "usage" / "labels.md").read_text()
    assert re.search(rf"chess-pipeline label +# every unlabelled distinct position, {default}\n", labels_md)
    datasets_md = (ROOT / "docs" / "usage" / "datasets.md").read_text()
    assert f"default {default}; `label_engine`" in datasets_md
    reproduce_md = (ROOT / "docs" / "usage" / "reproduce.md").read_text()
    assert f"them at {default} in the reproducible setting" in reproduce_md


def test_the_flags_reach_the_one_label_run_and_its_folder(tmp_path):
    """`label` builds the run config; the asset's LabelsConfig.run is the one LabelRun, and its
    limit names the folder the labels go to."""
    from cli.label import config_from_args
    from pipeline.labels.setting import Setting, labels_dir
    from pipeline.store.store import Store

    argv = ["label", "--nodes", "500", "--limit", "3", "--minutes", "2", "--order", "most_used", "--relabel"]
    config, _ = config_from_args(build_parser().parse_args(argv))
    run = config.run((1, 2), "run-1")
    assert (run.limit, run.max_positions, run.max_seconds, run.order, run.relabel) == (
        Limit("nodes", 500),
        3,
        120.0,
        "most_used",
        True,
    )
    assert (run.shards, run.run_id) == ((1, 2), "run-1")
    folder = labels_dir(Store(tmp_path), Setting("Stockfish 15.1", run.limit))
    assert folder == tmp_path / "labels" / "stockfish-15.1_nodes-500"
