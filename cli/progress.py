"""The command line's progress bar: one tqdm bar over the work a command asked for.

A run reports through its progress file (pipeline.progress; the assets write it, see
assets/progress.py): the bar polls it twice a second and shows counts, rate and ETA against
the total the run asked for (`label --limit 5` with 13 pending: "5/5"). Ingest, labels and
evaluation all use this one bar; it is off when stderr is not a terminal.
"""

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from assets.progress import PROGRESS_TAG
from pipeline.progress import WRITE_EVERY_S, Counts, read_progress_file
from pipeline.store.store import Store


def new_bar(desc: str, unit: str, total: int = 0) -> tqdm:
    """The bar (tqdm: count, rate and ETA against the total); off when stderr is not a terminal."""
    return tqdm(total=total, unit=unit, desc=desc, disable=None)


def show_counts(bar: tqdm) -> Callable[[Counts], None]:
    """A watch callback setting the bar to a run's counts: the total asked for, items handled."""

    def show(counts: Counts) -> None:
        if counts.total != bar.total:
            bar.total = counts.total
            bar.refresh()
        if counts.failed:
            bar.set_postfix_str(f"{counts.failed:,} failed", refresh=False)
        if counts.handled > bar.n:  # as increments: tqdm's rate and ETA follow the recent pace
            bar.update(counts.handled - bar.n)

    return show


def progress_file(store: Store, folder: str) -> Path:
    """Where this process's run writes its progress: <store>/<folder>/.progress-<pid>.json
    (removed when the run ends; a killed process's is removed by the next command)."""
    path = store.local_dir / folder / f".progress-{os.getpid()}.json"  # local even for an S3 store
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def watch(path: Path, on_counts: Callable[[Counts], None], every_s: float = WRITE_EVERY_S) -> Iterator[dict]:
    """Calls on_counts with the file's counts every `every_s` while the block runs (and once at
    its end), then removes the file. Yields the run tags that point a run at the file."""
    stop = threading.Event()

    def poll() -> None:
        counts = read_progress_file(path)
        if counts is not None:
            on_counts(counts)

    def loop() -> None:
        while not stop.wait(every_s):
            poll()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield {PROGRESS_TAG: str(path)}
    finally:
        stop.set()
        thread.join()
        poll()
        path.unlink(missing_ok=True)


@contextmanager
def run_bar(store: Store, folder: str, desc: str, unit: str) -> Iterator[dict]:
    """A bar fed by the progress file of the run(s) started inside the block; yields the run
    tags to start them with."""
    bar = new_bar(desc, unit)
    try:
        with watch(progress_file(store, folder), show_counts(bar)) as tags:
            yield tags
    finally:
        bar.close()
