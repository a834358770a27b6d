"""An archive the project writes is the same bytes whatever day it is written: a TD generation
played again on another day (after a kill between its archive and its checkpoint) and the sample
archive made again are the archive already in the store (one partition), not a second one that
differs only in the Date header. The day is changed for real: the process's time zone, set
26 hours apart, puts the local clock on two different calendar days at any instant."""

import datetime as dt
import time

import pytest

from pipeline.ingest.sample_archive import SampleArchiveConfig, play_games
from pipeline.store.store import Store
from training.td.config import TDConfig
from training.td.play import play_line

ZONES = ("WEST+12", "EAST-14")
"""POSIX time zones (no tz database needed): UTC-12 and UTC+14, always on different days."""


@pytest.fixture
def on_day(monkeypatch):
    """Put the process's local clock in one of ZONES; the zone is restored afterwards."""

    def put(zone: str) -> dt.date:
        monkeypatch.setenv("TZ", zone)
        time.tzset()
        return dt.date.today()

    yield put
    monkeypatch.undo()
    time.tzset()


def test_a_td_generation_played_on_two_days_is_the_same_archive(tmp_path, on_day):
    cfg = TDConfig(name="t", depth=1, games=2, max_plies=12, curve_games=0, workers=1, seed=5, generations=1)
    data, days = [], []
    for i, zone in enumerate(ZONES):
        days.append(on_day(zone))
        line = play_line(Store(tmp_path / str(i)).ensure(), cfg, log=lambda s: None)
        data.append(line.archives[0].read_bytes())
    assert days[0] != days[1]
    assert data[0] == data[1]
    assert b'[Date "????.??.??"]' in data[0]


def test_the_sample_archive_made_on_two_days_is_the_same_bytes(tmp_path, on_day, stockfish):
    # Full strength: Stockfish's Skill Level below 20 draws its move from a clock-seeded generator.
    config = SampleArchiveConfig(games=2, skill_levels=(20,), nodes=200, random_plies=2, max_plies=10)
    data, days = [], []
    for i, zone in enumerate(ZONES):
        days.append(on_day(zone))
        data.append(play_games(stockfish, tmp_path / f"{i}.pgn", config).read_bytes())
    assert days[0] != days[1]
    assert data[0] == data[1]
    assert b'[Date "????.??.??"]' in data[0]
