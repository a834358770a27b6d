"""`chess-pipeline`: the command line, a thin layer running the same assets through Dagster.

Every command that materialises something does it with the store's persistent Dagster
instance, so `chess-pipeline ui` shows those runs. The CLI is its own package above assets/:
it drives Dagster, and neither pipeline/, training/ nor assets/ may import it. launch.py is the
console script's entry point (free of imports at module level).

One module per command group, each with its parser (`add_parser`), a `cmd_*` that turns the
parsed flags into typed arguments, and service functions that run the assets and return typed
results (dataclasses), which `demo` calls directly:

- ingest.py    `ingest PATH...`  -> ingest_archives() -> IngestResult
- label.py     `label`           -> label() -> LabelResult
- labels.py    `labels export`, `labels import` -> pipeline.labels.exchange (no Dagster run)
- datasets.py  `datasets`        -> build_datasets() -> DatasetsResult
- train.py     `train`           -> train() -> TrainResult
- evaluate.py  `evaluate`        -> evaluate() -> EvaluationResult
- query.py     `sql`, `report`   -> run_sql(), run_report() (Arrow tables)
- ui.py        `ui`
- explore.py   `explore` (the explorer page)
- demo.py      `demo`: ingest, label, datasets, train and evaluate in turn
- reproduce.py `reproduce` (its flags, cmd_reproduce) -> reproduce_run.py: reproduce() (ingest,
               labels, the time budget's ledger), over reproduce_steps.py: run_steps() (the job's
               steps, kept or run) and reproduce_config.py: ReproduceConfig (each step's settings)

and what they share: runtime.py (store, instance, resources, running assets, why a run
failed), checks.py (asset checks that did not pass, one line each), progress.py (the one
progress bar), output.py (tables, CSV, JSON), flags.py (flags derived from the settings'
dataclasses, pipeline/settings.py), app.py (the parser and `main`). The metadata the commands
print is read through the records of assets/records.py, never by string key.
"""

from cli.app import build_parser, error_line, main, one_line
from cli.checks import failed_checks
from cli.runtime import failure_message
from cli.runtime import open_instance as _instance

__all__ = ["build_parser", "error_line", "failed_checks", "failure_message", "main", "one_line", "_instance"]
