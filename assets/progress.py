"""An asset's progress: pipeline.progress.Progress wired to the run's log and the CLI's bar.

The CLI names a progress file in the run tag PROGRESS_TAG (a run launched from the UI has
none); ingest, labels and evaluation report through `run_progress`, so they throttle their log
lines and write that file the same way.
"""

import dagster as dg

from pipeline.progress import Progress

PROGRESS_TAG = "chess-pipeline/progress-file"
"""Run tag naming a JSON file the asset keeps up to date with its progress (the CLI's bar)."""


def run_progress(context: dg.AssetExecutionContext, what: str, total: int = 0) -> Progress:
    """Progress counted in `what` (e.g. "positions"), logged to the run, written to the run's
    progress file when the CLI started the run."""
    return Progress(what, total, log=context.log.info, file=context.run.tags.get(PROGRESS_TAG))
