"""`chess-pipeline reproduce --hours`: each model run's share of the budget reaches its training
config, and the report is given the budget; the job's steps run through a recording stand-in for
`materialize` on a clock the test moves (no training: what each run is configured with is the
point), the real definitions, op configs and TrainConfig derivation."""

import dataclasses
import json
import time
from types import SimpleNamespace

import dagster as dg
import pytest

import cli.reproduce_config as rc
import cli.reproduce_run as rr
import cli.reproduce_steps as rs
from assets.reproduce import REPRODUCED
from assets.training import MODELS, train_config
from pipeline.research.budget import EVALUATION_SECONDS, evaluation_reserve
from pipeline.research.reproduction import PUBLISHED_SPLIT
from pipeline.store.store import Store

MODEL_SECONDS = 600.0
"""How long each model run takes on the test's clock (more than its share: the rest comes off the next shares)."""
BEFORE_TRAINING = 600.0
"""Ingest, labels and datasets, on the test's clock."""


def reserved(steps: list[str], evaluation: str = "full") -> float:
    """The seconds the budget is to set aside for the steps of `steps` after the last model run
    (those that ran after training), none of them timed by the test's empty instance: each at
    its kind's measured figure for `evaluation` (the default's full; ours with --with ours)."""
    last = max(i for i, n in enumerate(steps) if n.removeprefix(PUBLISHED_SPLIT) in MODELS)
    return evaluation_reserve(steps[last + 1 :], {}, evaluation).seconds


def job_steps(models: list[str], stages: tuple = ()) -> list[str]:
    from assets.reproduce import grid_extra, job_assets

    return job_assets(models, grid_extra(models), stages)


def test_each_model_run_gets_its_share_and_the_report_gets_the_budget(tmp_path, monkeypatch):
    clock = [BEFORE_TRAINING]
    calls: list[tuple[str, object]] = []

    def recording_materialize(assets, store, instance, *, selection, ops=None, tags=None, **kw):
        (name,) = selection
        calls.append((name, (ops or {}).get(name)))
        if name.removeprefix(PUBLISHED_SPLIT) in MODELS:
            clock[0] += MODEL_SECONDS
        return SimpleNamespace(success=True)

    monkeypatch.setattr(rs, "materialize", recording_materialize)
    monkeypatch.setattr(rs, "time", SimpleNamespace(monotonic=lambda: clock[0], strftime=time.strftime,
                                                    gmtime=time.gmtime))  # fmt: skip
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), profile="full", hours=3.0,
                             models=("mlp_bitmap_3class", "lubeck_wdl_mlp"))  # fmt: skip
    models = list(cfg.models)
    with dg.DagsterInstance.ephemeral() as instance:
        failures = rs.run_steps(Store(tmp_path / "store"), instance, cfg, models, {"profile": "full"}, {}, started=0.0)
    assert failures == []
    runs = [(name, op) for name, op in calls if name.removeprefix(PUBLISHED_SPLIT) in MODELS]
    assert {n for n, _ in runs} == {*models, *(PUBLISHED_SPLIT + m for m in models)}  # both protocols each
    # The rule: what is left when training starts, less the evaluation's measured time.
    pool = 3 * 3600 - BEFORE_TRAINING - reserved([n for n, _ in calls])
    assert pool > 0 and [n for n, _ in calls] == job_steps(models)  # every step ran
    beyond: list[float] = []  # what each finished run took beyond its share
    for k, (name, op) in enumerate(runs):
        # What is left, over the runs still to come, less the mean time a finished run took beyond its share.
        share = (pool - k * MODEL_SECONDS) / (len(runs) - k) - (sum(beyond) / len(beyond) if beyond else 0)
        assert op.max_minutes == pytest.approx(share / 60, abs=0.01), name
        beyond.append(max(MODEL_SECONDS - op.max_minutes * 60, 0.0))  # a run under its share: none
        t = train_config(name.removeprefix(PUBLISHED_SPLIT), op, "", "")  # the run's TrainConfig
        assert t.max_minutes == op.max_minutes and t.epochs == 50  # the full profile's epochs, not cut
    (report,) = [op for name, op in calls if name == "reproduction_report"]
    elapsed = BEFORE_TRAINING + len(runs) * MODEL_SECONDS
    assert "3 h for the whole command" in report.settings["time budget"]
    assert f"{reserved(job_steps(models)) / 60:.1f} min set aside for the" in report.settings["time budget"]
    assert f"{elapsed / 60:.1f} min when the report was written: within the budget" in report.settings["time budget"]
    for name, op in runs:
        assert f"{op.max_minutes:g} minutes (its time budget share)" in report.schedules[name]


def test_each_step_line_says_what_is_left_how_long_it_should_take_and_the_budget_spent(tmp_path, monkeypatch, capsys):
    """A finished step's line: the steps still to run (a failed step's dependants left out: they
    will be skipped), once no model run is left the reserve's figures for them, and the budget
    spent on the command's clock."""
    clock = [BEFORE_TRAINING]
    failing = "eval_suites_mlp_bitmap_3class"

    def recording_materialize(assets, store, instance, *, selection, ops=None, tags=None, **kw):
        (name,) = selection
        clock[0] += MODEL_SECONDS if name.removeprefix(PUBLISHED_SPLIT) in MODELS else 60.0
        return SimpleNamespace(success=name != failing, all_events=[])

    monkeypatch.setattr(rs, "materialize", recording_materialize)
    monkeypatch.setattr(rs, "time", SimpleNamespace(monotonic=lambda: clock[0], strftime=time.strftime,
                                                    gmtime=time.gmtime))  # fmt: skip
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), profile="full", hours=3.0,
                             models=("mlp_bitmap_3class", "lubeck_wdl_mlp"))  # fmt: skip
    steps = job_steps(list(cfg.models))
    with dg.DagsterInstance.ephemeral() as instance:
        rs.run_steps(Store(tmp_path / "store"), instance, cfg, list(cfg.models), {"profile": "full"}, {}, started=0.0)
    lines = {line.split("] ")[1].split(":")[0]: line for line in capsys.readouterr().out.splitlines() if "] " in line
             and (": done in" in line or ": failed after" in line)}  # fmt: skip
    # What the failed suites step takes with it: the model's report (it reads the suites' results).
    skipped = {"eval_report_mlp_bitmap_3class"}
    elapsed = BEFORE_TRAINING
    for i, name in enumerate(steps):
        elapsed += MODEL_SECONDS if name.removeprefix(PUBLISHED_SPLIT) in MODELS else 60.0
        if name in skipped:
            assert name not in lines
            elapsed -= 60.0  # skipped: never run
            continue
        failed_yet = steps.index(failing) <= i
        after = [n for n in steps[i + 1 :] if not (failed_yet and n in skipped)]
        line = lines[name]
        if not after:  # the last step: the command's own closing line then says the budget
            assert line.endswith(": done in 60.0 s"), line
            continue
        assert f"; {len(after)} step{'s' if len(after) > 1 else ''} to go" in line, line
        if not any(n.removeprefix(PUBLISHED_SPLIT) in MODELS for n in after):
            minutes = evaluation_reserve(after, {}, "full").seconds / 60
            assert f"to go, about {minutes:.{0 if minutes >= 10 else 1}f} min by the measured figures;" in line, line
        else:
            assert "about" not in line
        assert line.endswith(f"; {elapsed / 60:.1f} of the 3 h budget's 180 min spent"), line


def test_a_share_never_raises_a_profiles_own_bound():
    cfg = rc.ReproduceConfig(profile="quick", hours=8.0)
    quick = rc.train_run(cfg, "mlp_bitmap_3class", minutes=30.0)
    assert train_config("mlp_bitmap_3class", quick, "", "").max_minutes == 3.0  # the quick profile's 3 minutes
    assert train_config("mlp_bitmap_3class", rc.train_run(cfg, "mlp_bitmap_3class", 2.0), "", "").max_minutes == 2.0
    assert rc.train_run(cfg, "mlp_bitmap_3class").max_minutes is None  # no budget: left out, the profile's
    assert "3 minutes (below its time budget share 30 min)" in rc.schedule_text(cfg, "mlp_bitmap_3class", 30.0)


@pytest.mark.parametrize("hours", ["-1", "nan", "inf"])
def test_a_bad_budget_is_refused_in_one_line(hours, tmp_path, capsys):
    from cli.app import main

    with pytest.raises(SystemExit) as e:
        main(["--home", str(tmp_path / "store"), "reproduce", "--hours", hours])
    assert "--hours must be a number of hours, 0 or more (0: no budget)" in str(e.value)
    assert not (tmp_path / "store").exists()


def test_runs_that_will_not_train_take_no_share(tmp_path, monkeypatch):
    """A model run kept from an earlier command (up to date) or skipped (its dataset failed) is not
    one of the runs the training time is split between: the pool is split over those that train."""
    clock = [BEFORE_TRAINING]
    calls: list[tuple[str, object]] = []
    models = ["mlp_bitmap_3class", "lubeck_wdl_mlp"]
    kept = "mlp_bitmap_3class"  # kept: up to date, like every dataset and evaluation
    broken = PUBLISHED_SPLIT + MODELS["lubeck_wdl_mlp"].dataset  # fails: its model run is skipped

    def recording_materialize(assets, store, instance, *, selection, ops=None, tags=None, **kw):
        (name,) = selection
        calls.append((name, (ops or {}).get(name)))
        if name.removeprefix(PUBLISHED_SPLIT) in MODELS:
            clock[0] += MODEL_SECONDS
        if name == broken:
            return SimpleNamespace(success=False)
        return SimpleNamespace(success=True)

    def keep(instance, asset, name, settings, store=None):
        trains = rc.step_kind(name) == "model" and name != "model_results"
        return None if (trains and name != kept) or name == broken else "2026-11-26 00:00:00 UTC"

    monkeypatch.setattr(rs, "materialize", recording_materialize)
    monkeypatch.setattr(rs, "failure_message", lambda result: "broken on purpose")
    monkeypatch.setattr(rs, "up_to_date", keep)
    monkeypatch.setattr(rs, "time", SimpleNamespace(monotonic=lambda: clock[0], strftime=time.strftime,
                                                    gmtime=time.gmtime))  # fmt: skip
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), profile="full", hours=3.0, models=tuple(models))
    outcomes: dict[str, str] = {}
    with dg.DagsterInstance.ephemeral() as instance:
        rs.run_steps(Store(tmp_path / "store"), instance, cfg, models, {"profile": "full"}, outcomes, started=0.0)
    assert outcomes[kept] == "kept" and outcomes[PUBLISHED_SPLIT + "lubeck_wdl_mlp"].startswith("skipped")
    runs = [(name, op) for name, op in calls if name.removeprefix(PUBLISHED_SPLIT) in MODELS]
    assert [n for n, _ in runs] == ["lubeck_wdl_mlp", PUBLISHED_SPLIT + kept]  # the two that train
    # Two runs share the pool, not four: the first gets half of it, the second what is left.
    first = runs[0][1].max_minutes
    pool = 2 * first * 60
    assert 0 < pool <= 3 * 3600 - BEFORE_TRAINING
    second = (pool - MODEL_SECONDS) / 1 - max(MODEL_SECONDS - first * 60, 0)  # what is left, less any overrun
    assert runs[1][1].max_minutes == pytest.approx(second / 60, abs=0.02)


def test_a_command_run_again_goes_on_with_the_budget_its_ledger_kept(tmp_path, monkeypatch):
    """An earlier command with the same settings spent 20 minutes and was killed before training:
    the training pool is what is left of the hour after those 20 minutes and this command's own,
    the ledger is saved after each step, and the report says the budget ran over two commands."""
    from pipeline.research import budget as budget_module

    clock = [0.0]
    calls: list[tuple[str, object]] = []

    def recording_materialize(assets, store, instance, *, selection, ops=None, tags=None, **kw):
        (name,) = selection
        calls.append((name, (ops or {}).get(name)))
        clock[0] += MODEL_SECONDS if name.removeprefix(PUBLISHED_SPLIT) in MODELS else 60.0
        return SimpleNamespace(success=True)

    fake_time = SimpleNamespace(monotonic=lambda: clock[0], strftime=time.strftime, gmtime=time.gmtime)
    monkeypatch.setattr(rs, "materialize", recording_materialize)
    monkeypatch.setattr(rs, "time", fake_time)
    monkeypatch.setattr(budget_module, "time", fake_time)
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), profile="full", hours=1.0,
                             models=("mlp_bitmap_3class",))  # fmt: skip
    store = Store(tmp_path / "store")
    path = store.root / budget_module.LEDGER_DIR / budget_module.ledger_name(rr.budget_key(cfg))
    earlier = budget_module.BudgetLedger.open(path, rr.budget_key(cfg), cfg.hours)
    earlier.spent_before = 1200.0
    earlier.save()
    ledger = budget_module.BudgetLedger.open(path, rr.budget_key(cfg), cfg.hours)
    assert ledger.commands == 2 and ledger.spent_before == 1200.0
    with dg.DagsterInstance.ephemeral() as instance:
        failures = rs.run_steps(store, instance, cfg, list(cfg.models), {"profile": "full"}, {}, ledger=ledger)
    assert failures == []
    names = [n for n, _ in calls]
    first = next(i for i, n in enumerate(names) if n.removeprefix(PUBLISHED_SPLIT) in MODELS)
    before = 1200.0 + 60.0 * first  # the earlier command's time and this one's steps before training
    runs = [(n, op) for n, op in calls if n.removeprefix(PUBLISHED_SPLIT) in MODELS]
    pool = 3600 - before - reserved(names)
    assert runs[0][1].max_minutes == pytest.approx(pool / len(runs) / 60, abs=0.01)
    (report,) = [op for name, op in calls if name == "reproduction_report"]
    assert "counted over 2 commands" in report.settings["time budget"]
    saved = json.loads(path.read_text())
    assert saved["commands"] == 2 and not saved["finished"]
    assert saved["spent_s"] == pytest.approx(1200.0 + clock[0], abs=0.01)  # saved after the last step
    assert set(saved["budget"]["shares"]) == {n for n, _ in runs}


def _ledger_of(store: Store, cfg) -> dict:
    from pipeline.research.budget import LEDGER_DIR, ledger_name

    return json.loads((store.root / LEDGER_DIR / ledger_name(rr.budget_key(cfg))).read_text())


def test_the_command_closes_its_budget_only_when_every_step_is_done(tmp_path, monkeypatch, capsys):
    """reproduce() itself (the steps stand in: what they return, or raise): a command with failed
    steps, or stopped, leaves its budget open and the next goes on with it; a finished command
    closes it; other settings have a budget of their own; --new-budget starts afresh."""
    (tmp_path / "a.pgn").write_text("")
    store = Store(tmp_path / "store")
    outcome: list = [["m: failed"]]

    def steps(store, instance, cfg, models, paths, started, ledger):
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]

    monkeypatch.setattr(rr, "_reproduce", steps)
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), hours=1.0, models=("mlp_bitmap_3class",))
    with dg.DagsterInstance.ephemeral() as instance:
        rr.reproduce(store, instance, cfg)  # a step failed: open
        assert _ledger_of(store, cfg)["commands"] == 1 and not _ledger_of(store, cfg)["finished"]
        outcome[0] = KeyboardInterrupt()
        with pytest.raises(KeyboardInterrupt):
            rr.reproduce(store, instance, cfg)  # stopped: saved on the way out, still open
        assert _ledger_of(store, cfg)["commands"] == 2 and not _ledger_of(store, cfg)["finished"]
        other = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), hours=1.0, models=("lubeck_wdl_mlp",))
        outcome[0] = []
        rr.reproduce(store, instance, other)  # other settings: a budget of their own, closed at once
        assert _ledger_of(store, other) == {**_ledger_of(store, other), "commands": 1, "finished": True}
        # The same settings written otherwise (a relative folder) go on with the open budget, and close it.
        monkeypatch.chdir(tmp_path)
        same = rc.ReproduceConfig(data=".", suites=str(tmp_path), hours=1.0, models=("mlp_bitmap_3class",))
        rr.reproduce(store, instance, same)
        assert "going on with the budget of 2 earlier command(s)" in capsys.readouterr().out
        assert _ledger_of(store, cfg)["commands"] == 3 and _ledger_of(store, cfg)["finished"]
        outcome[0] = ["m: failed"]
        rr.reproduce(store, instance, cfg)  # closed: a new budget
        rr.reproduce(store, instance, dataclasses.replace(cfg, new_budget=True))  # open, but asked afresh
        assert _ledger_of(store, cfg)["commands"] == 1


def test_a_store_that_refuses_the_ledger_is_said_and_the_command_goes_on(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.pgn").write_text("")
    store = Store(tmp_path / "store")
    ran = []
    monkeypatch.setattr(rr, "_reproduce", lambda *a: ran.append(1) or [])

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pipeline.store.store_files.write_json", full)
    cfg = rc.ReproduceConfig(data=str(tmp_path), suites=str(tmp_path), hours=1.0, models=("mlp_bitmap_3class",))
    with dg.DagsterInstance.ephemeral() as instance:
        assert rr.reproduce(store, instance, cfg) == [] and ran
    err = capsys.readouterr().err
    assert "the time budget's ledger" in err and "could not be saved (OSError" in err and "Traceback" not in err


def test_the_reserve_takes_a_step_as_long_as_this_store_timed_it_with_the_same_settings(tmp_path):
    """A real run of a stand-in `elo_ratings` (1 s), tagged as reproduce tags its steps: the
    reserve counts what it took, with these evaluation settings only."""

    @dg.asset(name="elo_ratings")
    def stand_in() -> None:
        time.sleep(1.0)

    cfg = rc.ReproduceConfig(
        data=str(tmp_path), suites=str(tmp_path), hours=1.0, models=("mlp_bitmap_3class",), with_stages=("ours",)
    )  # elo_ratings: a step of the stage ours
    fingerprint = rc.settings_text(cfg, "evaluation")
    with dg.DagsterInstance.ephemeral() as instance:
        assert rs.run_seconds(instance, "elo_ratings", fingerprint) is None  # never made
        dg.materialize([stand_in], instance=instance, tags={rs.SETTINGS_TAG: fingerprint})
        took = rs.run_seconds(instance, "elo_ratings", fingerprint)
        assert took is not None and 1.0 <= took < 30
        quick = dataclasses.replace(cfg, quick_eval=True)
        assert rs.run_seconds(instance, "elo_ratings", rc.settings_text(quick, "evaluation")) is None
        reserve = rs.evaluation_reserve_of(instance, cfg, job_steps(list(cfg.models), cfg.with_stages))
    assert reserve.timed == 1
    elo = EVALUATION_SECONDS["ours"]["elo_ratings"]
    steps = job_steps(list(cfg.models), cfg.with_stages)
    assert reserve.seconds == pytest.approx(reserved(steps, "ours") - elo + took)


@pytest.mark.parametrize("evaluation", ["quick", "full", "ours"])
def test_every_step_after_training_has_a_measured_figure(evaluation):
    """A step no figure covers would stop a --hours command when its first model starts, hours in."""
    steps = job_steps(list(REPRODUCED), ("ours",))  # every step, the optional stage's too
    r = evaluation_reserve(steps[steps.index("model_results") :], {}, evaluation)
    assert r.steps > 3 * len(REPRODUCED) and r.seconds > 0
