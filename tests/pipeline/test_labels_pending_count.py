"""The pending count (the total behind the ETA) runs in a thread beside labelling: when it fails,
the run goes on and says, in one logged line, why it shows no total or ETA (issue 14, item 6)."""

import logging

import duckdb
import pytest

import pipeline.labels.labels
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun
from pipeline.store.store import Store
from tests.stores import add_pgn

GAMES = '[Event "a"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 *\n'


def test_a_failed_pending_count_is_logged_and_the_run_still_labels(tmp_path, stockfish, monkeypatch, caplog):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", GAMES)

    def fails(con, setting, run):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block")

    monkeypatch.setattr(pipeline.labels.labels, "count_pending", fails)
    seen = []
    with caplog.at_level(logging.WARNING, logger="pipeline.labels.labels"), EnginePool(stockfish, workers=1) as pool:
        stats = label_store(store, pool, LabelRun(), seen.append, progress_every_s=0.0)
    assert stats.labelled == 5 and stats.failed == 0  # the start position and four plies
    assert stats.pending_before == 0 and seen[-1].eta_seconds is None
    [record] = [r for r in caplog.records if r.name == "pipeline.labels.labels"]
    assert record.levelno == logging.WARNING and "\n" not in record.getMessage()
    assert record.getMessage() == (
        "could not count the pending positions, so this run shows no total and no "
        "ETA: Out of Memory Error: could not allocate block"
    )


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_the_failed_count_raises_nothing_in_its_thread(tmp_path, stockfish, monkeypatch):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "a.pgn", GAMES)
    monkeypatch.setattr(pipeline.labels.labels, "count_pending", lambda *a: 1 / 0)
    with EnginePool(stockfish, workers=1) as pool:
        assert label_store(store, pool, LabelRun()).labelled == 5
