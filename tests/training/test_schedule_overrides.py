"""One override block for training schedules (training.config.ScheduleOverrides), one meaning per
value wherever it is asked for: `chess-pipeline train`'s flags, a model asset's run config and
`chess-pipeline reproduce`'s caps. Left out: the profile's; 0 train rows or 0 minutes: no bound;
a value below those: refused in one line naming the setting. The quick profile's own figures
(training.catalog.PROFILES: 200,000 train rows, 4 epochs, 3 minutes) are the independent facts."""

import pytest

from training.catalog import PROFILES

QUICK = PROFILES["quick"]
MODEL = "mlp_bitmap_3class"  # takes the quick profile as it is (no changes of its own)


def _run_config(**given):
    from assets.training import TrainRunConfig, train_config

    return train_config(MODEL, TrainRunConfig(profile="quick", **given), "", "")


def _train_flags(tmp_path, *flags):
    """The TrainConfig `chess-pipeline train` gives the model for these flags (the parsed command
    line through cmd_train's own helpers), or SystemExit; no store is made."""
    from assets.training import TrainRunConfig, train_config
    from cli.app import build_parser
    from cli.train import OVERRIDE_FLAGS, overrides_from_args

    args = build_parser().parse_args(["--home", str(tmp_path / "store"), "train", MODEL, *flags])
    overrides = overrides_from_args(args, "train", OVERRIDE_FLAGS)
    run = TrainRunConfig(profile=args.profile, device=args.device, **overrides.given())
    return train_config(MODEL, run, "", "")


def test_left_out_is_the_profiles_and_zero_rows_is_every_row_in_train_and_the_run_config(tmp_path):
    for cfg in (_run_config(), _train_flags(tmp_path)):
        assert (cfg.max_train_rows, cfg.epochs, cfg.max_minutes) == (
            QUICK["max_train_rows"],
            QUICK["epochs"],
            QUICK["max_minutes"],
        )
    for cfg in (
        _run_config(max_train_rows=0, max_minutes=0.0),
        _train_flags(tmp_path, "--max-train-rows", "0", "--max-minutes", "0"),
    ):
        assert (cfg.max_train_rows, cfg.max_minutes) == (0, 0.0)  # TrainConfig's 0: every row, no bound
    cfg = _train_flags(tmp_path, "--max-train-rows", "1000", "--batch-size", "64", "--epochs", "2")
    assert (cfg.max_train_rows, cfg.batch_size, cfg.epochs) == (1000, 64, 2)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize(
    "field, flag, bad",
    [("max_train_rows", "--max-train-rows", -1), ("epochs", "--epochs", 0), ("max_minutes", "--max-minutes", -1.0)],
)
def test_a_value_with_no_meaning_is_refused_in_one_line_by_the_run_config_and_train(tmp_path, field, flag, bad):
    with pytest.raises(ValueError) as e:
        _run_config(**{field: bad})
    assert field in str(e.value) and "left out (the profile's)" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(SystemExit) as e:
        _train_flags(tmp_path, flag, str(bad))
    text = str(e.value)
    assert text.startswith(f"chess-pipeline train: {flag} must be ") and f"got {bad!r}" in text and "\n" not in text


def test_reproduce_caps_read_each_value_as_train_does():
    """reproduce takes the same values as caps: left out and 0 rows (no bound) both leave the
    profile's 200,000 rows, a number below it caps it; -1 (once 'the profile's') is refused."""
    from assets.training import train_config
    from cli.reproduce_config import ReproduceConfig, train_run
    from training.config import ScheduleOverrides

    def rows(caps):
        return train_config(MODEL, train_run(ReproduceConfig(profile="quick", caps=caps), MODEL), "", "").max_train_rows

    assert rows(ScheduleOverrides()) == rows(ScheduleOverrides(max_train_rows=0)) == QUICK["max_train_rows"]
    assert rows(ScheduleOverrides(max_train_rows=1000)) == 1000
    assert rows(ScheduleOverrides(max_train_rows=10**9)) == QUICK["max_train_rows"]  # a cap never raises it
    with pytest.raises(ValueError, match="max_train_rows must be 0 .all. or a number of rows"):
        ScheduleOverrides(max_train_rows=-1)


def test_the_override_flags_and_run_config_fields_are_described_by_the_one_dataclass():
    from assets.training import TrainRunConfig
    from cli.app import build_parser
    from pipeline.settings import field_docs
    from training.config import ScheduleOverrides

    docs = field_docs(ScheduleOverrides, require=True)
    assert {k: TrainRunConfig.model_fields[k].description for k in docs} == docs
    assert all(TrainRunConfig.model_fields[k].default is None for k in docs)  # left out: the profile's
    helps = {}
    parser = build_parser()
    for action in parser._subparsers._group_actions[0].choices["train"]._actions:
        helps.update({o: action.help for o in action.option_strings})
    for name, doc in docs.items():
        assert helps["--" + name.replace("_", "-")] == doc
