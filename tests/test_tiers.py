"""The fast tier (`make test-fast`: pytest -m "not slow") needs no Stockfish and no ../shared/data:
every test that requests one of tests/conftest.py's SLOW_FIXTURES, directly or through another
fixture, is marked slow."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SLOW_FIXTURES

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import json, os

def pytest_collection_finish(session):
    rows = [{"id": i.nodeid, "fixtures": sorted(i.fixturenames), "slow": i.get_closest_marker("slow") is not None}
            for i in session.items]
    with open(os.environ["TIER_PROBE_OUT"], "w") as f:
        json.dump(rows, f)
"""


@pytest.mark.slow  # collects the whole suite in a process of its own (5 to 15 s)
def test_no_fast_test_requests_stockfish_or_the_shared_data(tmp_path):
    (tmp_path / "tier_probe.py").write_text(PROBE)
    out = tmp_path / "items.json"
    env = {
        **os.environ,
        "TIER_PROBE_OUT": str(out),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tier_probe", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    items = json.loads(out.read_text())
    fast = [i for i in items if not i["slow"]]
    assert fast and len(fast) < len(items)
    assert [i["id"] for i in fast if SLOW_FIXTURES & set(i["fixtures"])] == []
    # The hook sees fixtures requested through other fixtures: fics_2022 asks for shared_data.
    uses_fics = [i for i in items if "fics_2022" in i["fixtures"]]
    assert uses_fics and all("shared_data" in i["fixtures"] and i["slow"] for i in uses_fics)
