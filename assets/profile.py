"""The deployment profile: `embedded` (the default) or `cluster`, chosen by CHESS_PIPELINE_PROFILE.

- embedded: SQLite Dagster instance (deploy/embedded/dagster.yaml), Dagster's multiprocess
  executor, engines on the local cores. What `make demo`, `make test` and the README's
  commands use.
- cluster: Postgres instance storage (deploy/cluster/dagster.yaml, settings from DAGSTER_PG_*),
  Dagster's Celery executor with the broker at CHESS_PIPELINE_BROKER_URL
  (deploy/cluster/celery.yaml, the same file the workers start from), the labels step on the
  `stockfish` queue and every other step on `dagster`.

Read where a process starts (the CLI, the code location's @dg.definitions), never at import.
The profile's files live in deploy/ beside this package (deploy/ is package data of its own
package, installed beside assets/).
"""

import os
from pathlib import Path
from typing import Literal, get_args

import dagster as dg
import yaml

Profile = Literal["embedded", "cluster"]
PROFILES: tuple[str, ...] = get_args(Profile)
PROFILE_ENV = "CHESS_PIPELINE_PROFILE"
BROKER_ENV = "CHESS_PIPELINE_BROKER_URL"
"""The Celery broker (and result backend) URL of the cluster profile, read by deploy/cluster/celery.yaml."""
DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
QUEUE_TAG = "dagster-celery/queue"
"""dagster-celery's op tag naming the queue a step is sent to."""
STOCKFISH_QUEUE = "stockfish"
DEFAULT_QUEUE = "dagster"
"""dagster-celery's default queue: every step without a queue tag."""
ENGINE_OP_TAGS = {QUEUE_TAG: STOCKFISH_QUEUE}
"""op_tags of every asset that runs Stockfish (labels): its step goes to the `stockfish` queue,
whose workers' concurrency bounds the engines on a machine. The multiprocess executor of the
embedded profile ignores the tag."""


class ProfileError(ValueError):
    """CHESS_PIPELINE_PROFILE names no profile; the message lists the valid ones."""


def profile_from_env(environ=os.environ) -> Profile:
    """The profile CHESS_PIPELINE_PROFILE chooses (unset or empty: embedded)."""
    raw = environ.get(PROFILE_ENV, "").strip()
    if not raw:
        return "embedded"
    if raw not in PROFILES:
        raise ProfileError(f"{PROFILE_ENV}={raw!r} is not a deployment profile: use one of {', '.join(PROFILES)}")
    return raw  # type: ignore[return-value]


def profile_dir(profile: Profile) -> Path:
    return DEPLOY / profile


def dagster_yaml(profile: Profile) -> str:
    """The text of the profile's dagster.yaml (the instance a DAGSTER_HOME of that profile holds)."""
    return (profile_dir(profile) / "dagster.yaml").read_text()


def celery_yaml_path() -> Path:
    return profile_dir("cluster") / "celery.yaml"


def celery_config() -> dict:
    """The Celery executor's config block (deploy/cluster/celery.yaml's execution.config)."""
    return yaml.safe_load(celery_yaml_path().read_text())["execution"]["config"]


def executor(profile: Profile) -> dg.ExecutorDefinition | None:
    """The Definitions' executor: None (Dagster's default, multiprocess) for embedded, the
    Celery executor configured from deploy/cluster/celery.yaml for cluster."""
    if profile == "embedded":
        return None
    from dagster_celery import celery_executor

    return celery_executor.configured(celery_config(), name="celery")


def ensure_instance_yaml(home: Path, profile: Profile, replace: tuple[str, ...] = ()) -> Path:
    """home/dagster.yaml for the profile: written when missing, or when it holds what this
    project wrote (either profile's file, or an older text in `replace`); a file the user
    changed is kept as it is."""
    cfg = home / "dagster.yaml"
    want = dagster_yaml(profile)
    ours = {dagster_yaml(p) for p in PROFILES} | set(replace)
    if not cfg.exists() or (cfg.read_text() in ours and cfg.read_text() != want):
        cfg.write_text(want)
    return cfg
