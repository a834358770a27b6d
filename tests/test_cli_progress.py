"""The CLI's one progress bar, and a label command made of several runs (issue 14, item 4)."""

import io
import time

from tqdm import tqdm

from assets.records import LabelsMetadata
from cli.label import LabelResult
from cli.progress import show_counts, watch
from pipeline.progress import Counts, Progress


def test_the_bar_follows_the_runs_progress_file_and_the_file_goes_at_the_end(tmp_path):
    path = tmp_path / ".progress-1.json"
    seen: list[Counts] = []
    with watch(path, seen.append, every_s=0.05) as tags:
        assert tags == {"chess-pipeline/progress-file": str(path)}  # what the run is started with
        run = Progress("positions", 5, file=path, write_every_s=0.0)  # as the labels asset writes it
        run.update(2, 1)
        time.sleep(0.3)
        run.update(4, 1)  # the total: written at once
    assert seen[0] == Counts(2, 1, 5) and seen[-1] == Counts(4, 1, 5)
    assert not path.exists()
    out = io.StringIO()
    bar = tqdm(total=0, unit="position", desc="label", file=out, disable=False)
    show_counts(bar)(seen[-1])
    bar.close()
    assert "5/5" in out.getvalue() and "1 failed" in out.getvalue()  # the total asked for, not the backlog


def _meta(labelled, failed, seconds, distinct, positions, coverage, engines=2) -> LabelsMetadata:
    return LabelsMetadata(
        engine="Stockfish 15.1",
        limit="depth 8",
        mode="new",
        labelled=labelled,
        failed=failed,
        seconds=seconds,
        positions_per_second=labelled / seconds,
        engines=engines,
        distinct_positions=distinct,
        positions=positions,
        repeat_share=1 - distinct / positions,
        coverage=coverage,
    )


def test_runs_over_disjoint_shards_add_up_to_one_summary():
    a = LabelResult(_meta(90, 10, 10.0, 100, 150, 0.9), {"coverage": False}, [], ["coverage a"])
    b = LabelResult(_meta(300, 0, 20.0, 300, 350, 1.0, engines=4), {"coverage": True}, ["dup b"], [])
    both = LabelResult.combine([a, b])
    m = both.metadata
    assert (m.labelled, m.failed, m.seconds, m.positions_per_second) == (390, 10, 30.0, 13.0)
    assert (m.distinct_positions, m.positions, m.engines) == (400, 500, 4)
    assert m.coverage == 0.975 and m.repeat_share == 0.2  # (90 + 300) / 400; 1 - 400 / 500
    assert both.checks == {"coverage": False} and both.check_errors == ["dup b"]
    assert both.check_warnings == ["coverage a"]
    assert LabelResult.combine([a]) is a
    assert both.line() == (
        "labels (Stockfish 15.1, depth 8, new): 390 labelled, 10 failed in 30.0s (13.0 positions/s on 4 "
        "engine(s)); coverage 97.50% of 400 distinct positions (500 positions, 20.0% repeats)"
    )
