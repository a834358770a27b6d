"""What each step of `chess-pipeline reproduce` was made with, kept in the store itself.

One JSON object a step, <root>/reproduce/steps/<step>.json, written whole or not at all
(store_files.write_json: a temporary file renamed into place; on S3 an object uploaded in one
piece), so what reproduce keeps or redoes is decided from the store: a second machine on the same
S3 store, with a Dagster instance of its own, keeps what the first finished.

A step's record says the settings it was made with, when it finished (made_at), and when each of
its inputs had last changed as it began (inputs), so an input changed since redoes it. While the
step runs, its record says so (made_at None) with the run folder it trains in (folder), so a model
run killed half-way trains on in its own folder when the same command runs again with the same
settings and inputs. The ingest step's record also holds the sha256 of each archive ingested.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

from pipeline.store.storage_paths import StorePath
from pipeline.store.store_files import read_json, write_json

STEPS_DIR = "reproduce/steps"
"""Where the step records lie under the store's root."""
CLOCK_SLACK_S = 1.0
"""How far before a step's recorded start a materialisation of it may be stamped (the record's
start is made_at less the seconds the command measured, the instance's stamp its own clock)."""


@dataclass(frozen=True)
class StepRecord:
    settings: str = ""
    """The settings text the step was made (or is being made) with."""
    made_at: float | None = None
    """When the step finished (seconds since the epoch); None while it runs (or was killed running)."""
    inputs: dict[str, float | None] = field(default_factory=dict)
    """Each input's last change (seconds since the epoch; None: none known) when the step began."""
    seconds: float | None = None
    """How long the step's run took."""
    folder: str = ""
    """The run folder a model step trains in (models/<model>/<folder>)."""
    archives: dict[str, str] = field(default_factory=dict)
    """Ingest only: each archive partition ingested, with the sha256 of the bytes ingested."""

    @property
    def finished(self) -> bool:
        return self.made_at is not None

    @property
    def began(self) -> float | None:
        """When the finished step's run began (made_at less its seconds), CLOCK_SLACK_S earlier."""
        if self.made_at is None:
            return None
        return self.made_at - (self.seconds or 0.0) - CLOCK_SLACK_S

    def made_during(self, timestamp: float) -> bool:
        """Whether `timestamp` (a materialisation's, from a Dagster instance) falls within the
        finished step's run (began to made_at)."""
        return self.made_at is not None and self.began <= timestamp <= self.made_at


def record_path(root: StorePath, step: str) -> StorePath:
    return root / STEPS_DIR / f"{step}.json"


def read_record(root: StorePath, step: str) -> StepRecord | None:
    """The step's record, or None where there is none (or it cannot be read as one)."""
    data = read_json(record_path(root, step))
    if not data:
        return None
    known = {k: v for k, v in data.items() if k in StepRecord.__dataclass_fields__}
    try:
        return StepRecord(**known)
    except TypeError:
        return None


def write_record(root: StorePath, step: str, record: StepRecord) -> None:
    write_json(record_path(root, step), asdict(record))


def finished(
    root: StorePath, step: str, settings: str, inputs: dict[str, float | None], seconds: float, **extra
) -> StepRecord:
    """Record the step finished now, made with `settings` from `inputs`; the record."""
    record = StepRecord(settings, time.time(), dict(inputs), round(seconds, 3), **extra)
    write_record(root, step, record)
    return record


def run_folder(root: StorePath, step: str, settings: str, inputs: dict[str, float | None]) -> str:
    """The run folder the step trains in: the one its record names where it was started with the
    same settings and inputs and did not finish (killed: it trains on from its checkpoint), else
    a new one; recorded as started before it runs."""
    old = read_record(root, step)
    if old is not None and not old.finished and old.folder and old.settings == settings and old.inputs == inputs:
        return old.folder
    folder = str(uuid.uuid4())
    write_record(root, step, StepRecord(settings, None, dict(inputs), folder=folder))
    return folder
