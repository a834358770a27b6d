"""The Definitions: every asset, asset check, job, sensor and schedule, by name, against a snapshot.

A definition dropped from build_defs (or renamed) fails test_definitions_match_the_snapshot.
When the change is meant, regenerate the snapshot and commit it with the change:

    CHESS_PIPELINE_UPDATE_SNAPSHOT=1 .venv/bin/python -m pytest -q tests/assets/test_definitions.py
"""

import json
import os
from pathlib import Path

import dagster as dg

import assets.evaluation
from assets.definitions import build_defs

SNAPSHOT = Path(__file__).with_name("definitions_snapshot.json")
UPDATE = "CHESS_PIPELINE_UPDATE_SNAPSHOT"
REGENERATE = f"{UPDATE}=1 .venv/bin/python -m pytest -q tests/assets/test_definitions.py"


def definition_names(defs: dg.Definitions) -> dict[str, list[str]]:
    """Every definition by name, sorted: asset keys, checks as <asset>:<check>, jobs (not
    Dagster's implicit __ASSET_JOB), sensors and schedules."""
    graph = defs.resolve_asset_graph()
    return {
        "assets": sorted(k.to_user_string() for k in graph.get_all_asset_keys()),
        "asset_checks": sorted(f"{c.asset_key.to_user_string()}:{c.name}" for c in graph.asset_check_keys),
        "jobs": sorted(j.name for j in defs.resolve_all_job_defs() if not j.name.startswith("__")),
        "sensors": sorted(s.name for s in defs.sensors or ()),
        "schedules": sorted(s.name for s in defs.schedules or ()),
    }


def differences(got: dict[str, list[str]], want: dict[str, list[str]]) -> list[str]:
    """One line per kind that differs: the names missing from got and the names it adds."""
    lines = []
    for kind in sorted(set(got) | set(want)):
        missing = sorted(set(want.get(kind, ())) - set(got.get(kind, ())))
        added = sorted(set(got.get(kind, ())) - set(want.get(kind, ())))
        if missing:
            lines.append(f"{kind} missing: {', '.join(missing)}")
        if added:
            lines.append(f"{kind} not in the snapshot: {', '.join(added)}")
    return lines


def test_definitions_match_the_snapshot():
    got = definition_names(build_defs({}))
    if os.environ.get(UPDATE) == "1":
        SNAPSHOT.write_text(json.dumps(got, indent=1) + "\n")
    want = json.loads(SNAPSHOT.read_text())
    diff = differences(got, want)
    assert not diff, (
        "build_defs differs from tests/assets/definitions_snapshot.json:\n  "
        + "\n  ".join(diff)
        + f"\nif the change is meant, regenerate the snapshot: {REGENERATE}"
    )


def test_the_snapshot_catches_the_evaluation_assets_dropped_from_build_defs(monkeypatch):
    monkeypatch.setattr(assets.evaluation, "evaluation_assets", [])
    diff = differences(definition_names(build_defs({})), json.loads(SNAPSHOT.read_text()))
    missing = next(line for line in diff if line.startswith("assets missing: "))
    assert {"elo_ratings", "eval_head_to_head"} <= set(missing.removeprefix("assets missing: ").split(", "))


def test_definitions_load_with_every_asset_check_sensor_schedule_and_job():
    defs = build_defs({})
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert {
        "games",
        "rejected_games",
        "positions",
        "duckdb_views",
        "labels",
        "sabatelli_3class",
        "sabatelli_15class",
        "sabatelli_20class",
        "sabatelli_regression",
        "deepchess",
        "lubeck_wdl",
        "hui_checkmate",
        "piece_values",
        "mlp_bitmap_3class",
        "mlp_algebraic_3class",
        "cnn_bitmap_3class",
        "cnn_algebraic_3class",
        "mlp_bitmap_15class",
        "mlp_bitmap_20class",
        "mlp_bitmap_regression",
        "lubeck_wdl_mlp",
        "cnn_features_3class",
        "cnn_features_15class",
        "model_results",
    } <= keys
    assert defs.resolve_sensor_def("archives_sensor")
    assert defs.resolve_job_def("ingest_archive")
    assert defs.resolve_job_def("relabel_labels")
    checks = {c.name for c in defs.resolve_asset_graph().asset_check_keys}
    assert {
        "reconciles_with_file",
        "one_position_per_ply",
        "coverage",
        "scores_in_range",
        "no_duplicate_labels",
        "disjoint_splits",
        "class_balance",
        "label_coverage",
        "rows_per_split",
    } <= checks


def test_nightly_schedule_defaults_to_two_oclock_and_reads_its_settings_from_the_environment():
    default = build_defs({}).resolve_schedule_def("nightly_relabel")
    assert default.cron_schedule == "0 2 * * *"
    assert default.default_status.value == "RUNNING"
    custom = build_defs(
        {
            "CHESS_PIPELINE_RELABEL_CRON": "30 3 * * 1",
            "CHESS_PIPELINE_RELABEL_TZ": "Europe/Oslo",
            "CHESS_PIPELINE_RELABEL_DEPTH": "14",
        }
    ).resolve_schedule_def("nightly_relabel")
    assert custom.cron_schedule == "30 3 * * 1"
    assert custom.execution_timezone == "Europe/Oslo"
    assert "depth 14" in custom.description
