"""The deployment profile choice (assets/profile.py): fast, no servers."""

import pytest

from assets.profile import (
    PROFILE_ENV,
    QUEUE_TAG,
    STOCKFISH_QUEUE,
    ProfileError,
    dagster_yaml,
    ensure_instance_yaml,
    profile_from_env,
)


@pytest.mark.parametrize(
    ("value", "profile"), [(None, "embedded"), ("", "embedded"), ("embedded", "embedded"), ("cluster", "cluster")]
)
def test_profile_from_env(value, profile):
    assert profile_from_env({} if value is None else {PROFILE_ENV: value}) == profile


@pytest.mark.parametrize("value", ["clustr", "Cluster", "k8s"])
def test_a_misspelt_profile_is_one_line_naming_the_valid_ones(value):
    with pytest.raises(ProfileError) as e:
        profile_from_env({PROFILE_ENV: value})
    msg = str(e.value)
    assert "\n" not in msg and repr(value) in msg and "embedded, cluster" in msg


def test_the_embedded_instance_is_sqlite_and_the_cluster_one_postgres_from_env():
    import yaml

    embedded = yaml.safe_load(dagster_yaml("embedded"))
    cluster = yaml.safe_load(dagster_yaml("cluster"))
    assert "storage" not in embedded  # Dagster's default: SQLite under DAGSTER_HOME
    db = cluster["storage"]["postgres"]["postgres_db"]
    # Nothing machine-specific: every connection setting is read from the environment.
    assert {k: v for k, v in db.items() if k != "scheme"} == {
        "hostname": {"env": "DAGSTER_PG_HOST"},
        "port": {"env": "DAGSTER_PG_PORT"},
        "username": {"env": "DAGSTER_PG_USER"},
        "password": {"env": "DAGSTER_PG_PASSWORD"},
        "db_name": {"env": "DAGSTER_PG_DB"},
    }


def test_instance_yaml_follows_the_profile_and_keeps_a_users_file(tmp_path):
    cfg = ensure_instance_yaml(tmp_path, "embedded", replace=("telemetry:\n  enabled: false\n",))
    assert cfg.read_text() == dagster_yaml("embedded")
    ensure_instance_yaml(tmp_path, "cluster")
    assert cfg.read_text() == dagster_yaml("cluster")
    cfg.write_text("telemetry:\n  enabled: true\n")  # the user's own
    ensure_instance_yaml(tmp_path, "embedded")
    assert cfg.read_text() == "telemetry:\n  enabled: true\n"
    cfg.write_text("telemetry:\n  enabled: false\n")  # what older versions wrote
    ensure_instance_yaml(tmp_path, "embedded", replace=("telemetry:\n  enabled: false\n",))
    assert cfg.read_text() == dagster_yaml("embedded")


def test_the_cli_writes_the_embedded_profiles_file():
    from cli import runtime

    assert runtime.DAGSTER_YAML == dagster_yaml("embedded")


def test_executor_follows_the_profile():
    from assets.definitions import build_defs

    assert build_defs({}).executor is None  # Dagster's multiprocess default, as before
    celery = build_defs({PROFILE_ENV: "cluster"}).executor
    assert celery is not None and celery.name == "celery"
    # Its config is deploy/cluster/celery.yaml's, the file the workers start from.
    from assets.profile import celery_config

    assert celery_config()["broker"] == {"env": "CHESS_PIPELINE_BROKER_URL"}


def test_labels_step_goes_to_the_stockfish_queue():
    """The labels op carries dagster-celery's queue tag; no other op goes to that queue."""
    from assets.definitions import build_defs

    defs = build_defs({PROFILE_ENV: "cluster"})
    graph = defs.resolve_asset_graph()
    queues = {}
    for key in graph.get_all_asset_keys():
        assets_def = graph.get(key).assets_def
        if assets_def.is_executable:
            queues[assets_def.op.name] = assets_def.op.tags.get(QUEUE_TAG)
    assert queues["labels"] == STOCKFISH_QUEUE, queues
    assert [name for name, q in queues.items() if q == STOCKFISH_QUEUE] == ["labels"], queues
