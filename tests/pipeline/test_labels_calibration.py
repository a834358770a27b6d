"""The search timeout's calibration against engines that answer it wrongly: wrappers around the
real Stockfish (tests/engines.py) whose reply to one calibration search has no `bestmove`."""

import time
from pathlib import Path

import pytest

from pipeline.labels.calibration import (
    CALIBRATION_FENS,
    CALIBRATION_TIMEOUT_S,
    TIMEOUT_FLOOR_S,
    TIMEOUT_MULTIPLE,
    search_timeout,
)
from pipeline.labels.engine import EngineError
from pipeline.labels.pool import STOP_GRACE_S, EnginePool
from pipeline.labels.uci import Limit
from tests.engines import search_fault_stockfish

LIMIT = Limit("depth", 6)
KIWIPETE = CALIBRATION_FENS[1]


@pytest.mark.parametrize(
    "mode, reason",
    [
        ("nobestmove", "malformed reply where `bestmove` was due; its line 'junk instead of bestmove'"),
        ("exit", "engine exited (exit code 0); its last line 'info depth 6 "),
    ],
)
def test_a_calibration_reply_without_bestmove_is_said_as_what_it_is_at_once(tmp_path, stockfish, mode, reason):
    """Info lines, then a junk line (or the engine's exit) where `bestmove` was due: the search
    fails at once with what happened, not after the calibration's 60 s as `engine hung`, and the
    run's timeout is measured from the other three searches (20 x the slowest, at least 2 s)."""
    path = search_fault_stockfish(tmp_path, stockfish, KIWIPETE, mode)
    # As the Stockfish resource starts a pool whose timeout is to be measured.
    with EnginePool(path, workers=1, timeout_s=CALIBRATION_TIMEOUT_S) as pool:
        start = time.monotonic()
        measured = search_timeout(pool, LIMIT)
        took = time.monotonic() - start
        assert pool.timeout_s == CALIBRATION_TIMEOUT_S and pool.retries == 2  # the pool's own, given back
    assert Path(f"{path}.faults").read_text().splitlines() == [mode]  # the fault did happen, once
    assert took < 10, f"calibration took {took:.1f}s"
    (why,) = measured.failed
    assert why.startswith(reason) and "hung" not in why, why
    assert f"a calibration search failed, passed over: {why}" in measured.how
    assert "the slowest of 3 calibration searches" in measured.how
    assert measured.seconds == max(TIMEOUT_FLOOR_S, round(TIMEOUT_MULTIPLE * measured.measured_s, 1))
    assert measured.seconds < CALIBRATION_TIMEOUT_S / 4  # a depth-6 search takes milliseconds


def test_an_engine_that_fails_two_calibration_searches_is_refused_in_one_line(tmp_path, stockfish):
    path = search_fault_stockfish(tmp_path, stockfish, CALIBRATION_FENS[1:3], "nobestmove", times=2)
    with EnginePool(path, workers=1, timeout_s=CALIBRATION_TIMEOUT_S) as pool:
        start = time.monotonic()
        with pytest.raises(EngineError) as e:
            search_timeout(pool, LIMIT)
    assert time.monotonic() - start < 10
    message = str(e.value)
    assert "\n" not in message and message.startswith("Stockfish 15.1 failed 2 of 3 calibration searches (depth 6)")
    assert message.count("malformed reply where `bestmove` was due") == 2
    assert message.endswith("to label without calibrating")


def test_a_hung_calibration_search_is_bounded_and_its_bound_is_never_the_runs_timeout(tmp_path, stockfish, monkeypatch):
    """The engine goes silent in one calibration search: that search is bounded by the
    calibration's own timeout (made 1 s here, 60 s in a run) and `stop`'s grace, the engine is
    restarted, and the run's timeout is measured from the other searches."""
    from pipeline.labels import calibration

    monkeypatch.setattr(calibration, "CALIBRATION_TIMEOUT_S", 1.0)
    path = search_fault_stockfish(tmp_path, stockfish, KIWIPETE, "hang")
    with EnginePool(path, workers=1, timeout_s=CALIBRATION_TIMEOUT_S) as pool:
        start = time.monotonic()
        measured = search_timeout(pool, LIMIT)
        took = time.monotonic() - start
        assert pool.restarts == 1 and pool.timeout_s == CALIBRATION_TIMEOUT_S
    assert 1.0 < took < 1.0 + STOP_GRACE_S + 5
    assert measured.failed == ("engine hung: no result within 1s, nor after `stop`",)
    assert measured.seconds == max(TIMEOUT_FLOOR_S, round(TIMEOUT_MULTIPLE * measured.measured_s, 1))
