import os
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "data"

SLOW_FIXTURES = frozenset({"stockfish", "shared_data", "fics_2022", "fics_search", "compiled"})
"""A test that uses one of these (directly or through another fixture) is in the slow tier:
it runs the real engine, reads the real archives or needs the compiled loops. The fast tier,
`make test-fast` (`pytest -m "not slow"`), needs neither Stockfish nor ../shared/data."""


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def _require_shared() -> bool:
    return os.environ.get("CHESS_PIPELINE_REQUIRE_SHARED") == "1"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data: skipped when absent, a failure when CHESS_PIPELINE_REQUIRE_SHARED=1."""
    if not (SHARED / "pgn").is_dir():
        msg = f"shared data not found at {SHARED} (the real FICS/lichess archives live there)"
        if _require_shared():
            pytest.fail(msg + " and CHESS_PIPELINE_REQUIRE_SHARED=1")
        pytest.skip(msg)
    return SHARED


@pytest.fixture(scope="session")
def fics_2022(shared_data) -> Path:
    return shared_data / "pgn" / "ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst"


@pytest.fixture(scope="session")
def fics_search(shared_data) -> Path:
    return shared_data / "pgn" / "ficsgamesdb_search_122216.pgn.zst"


@pytest.fixture(scope="session")
def stockfish() -> str:
    from pipeline.labels.uci import EngineNotFound, find_stockfish

    try:
        return find_stockfish()
    except EngineNotFound as e:
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def compiled():
    """pipeline.ingest._replay: skipped where no C compiler built it, a failure under CI."""
    from pipeline.ingest.replay import compiled as module

    if module is None:
        msg = "the compiled loops (pipeline/ingest/_replay.c) are not built: was a C compiler there at install?"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg + " The Python loops are still tested.")
    return module
