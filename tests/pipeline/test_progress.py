"""pipeline.progress: the one throttle, ETA and progress file of ingest, labels and evaluation."""

import json

import pytest

from pipeline.progress import Counts, Progress, Throttle, eta_seconds, format_eta, read_progress_file


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    "seconds,text", [(None, "?"), (0, "0m00s"), (59.9, "0m59s"), (245, "4m05s"), (3600, "1h00m"), (7620, "2h07m")]
)
def test_format_eta(seconds, text):
    assert format_eta(seconds) == text


def test_eta_is_unknown_without_a_total_or_a_rate_and_never_past_the_budget():
    assert eta_seconds(50, 0, 5.0) is None  # total not counted yet
    assert eta_seconds(0, 100, 0.0) is None  # nothing done yet
    assert eta_seconds(50, 100, 5.0) == 10.0
    assert eta_seconds(50, 100, 5.0, budget_left_s=4.0) == 4.0
    assert eta_seconds(120, 100, 5.0) == 0.0


def test_throttle_counts_from_its_creation_and_can_be_forced():
    clock = Clock()
    t = Throttle(10.0, clock)
    assert not t.due()
    clock.now += 9.9
    assert not t.due()
    clock.now += 0.1
    assert t.due() and not t.due()
    assert t.due(force=True)
    clock.now += 5
    assert not t.due()  # the forced one restarted the interval


def test_progress_logs_at_most_every_interval_and_always_the_end(tmp_path):
    clock, lines = Clock(), []
    p = Progress("positions", 100, log=lines.append, log_every_s=10.0, clock=clock)
    for i in range(1, 51):  # 50 items over 10 s: one line, when the 10 s are up
        clock.now += 0.2
        p.update(i, detail=f" ({i} labelled, 0 failed)", suffix=" (shard 03)")
    assert lines == ["50 of 100 positions done (50 labelled, 0 failed), 5.0 positions/s, ETA 0m10s (shard 03)"]
    clock.now += 1
    p.update(99, 1)  # the total reached: said at once
    assert lines[-1] == "100 of 100 positions done, 9.1 positions/s, ETA 0m00s"
    clock.now += 1
    p.update(100, 1, 101, final=True)  # the caller's last report, whatever the total
    assert len(lines) == 3


def test_progress_without_a_total_says_no_total_and_no_eta():
    clock, lines = Clock(), []
    p = Progress("games", log=lines.append, log_every_s=5.0, clock=clock)
    clock.now += 5
    p.update(2000, 34, detail=" (31,000 plies, 6,200 plies/s)")
    assert lines == ["2,034 games done (31,000 plies, 6,200 plies/s), 407 games/s"]


def test_progress_file_holds_the_counts_and_the_total_asked_for(tmp_path):
    clock = Clock()
    path = tmp_path / "progress.json"
    p = Progress("suite positions", 40, file=path, write_every_s=0.5, clock=clock)
    p.step()
    assert not path.exists()  # not before the first half second
    clock.now += 0.5
    p.step()
    assert json.loads(path.read_text()) == {"done": 2, "failed": 0, "total": 40}
    clock.now += 0.1
    p.set(40)  # the evaluation's callback: done (and total) so far; the end is written at once
    assert read_progress_file(path) == Counts(40, 0, 40)
    assert [q.name for q in tmp_path.iterdir()] == ["progress.json"]  # atomic: no temp file left


def test_reading_a_progress_file_that_is_not_there_or_not_one(tmp_path):
    assert read_progress_file(tmp_path / "missing.json") is None
    (tmp_path / "half.json").write_text('{"done": 3')
    assert read_progress_file(tmp_path / "half.json") is None
    (tmp_path / "other.json").write_text('{"games": 3}')
    assert read_progress_file(tmp_path / "other.json") is None
    assert Counts(3, 2, 10).handled == 5
