"""benchmarks/derived_key.py (issue 38): the key its SQL macro derives from a row's planes is the
polyglot key, checked against the keys the polyglot book format publishes for its reference
line (an independent fact, not the store's own hashing), and the script end to end on a store."""

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.derived_key import DERIVED, zobrist_macro
from pipeline.store import duck
from pipeline.store.store import Store
from tests.stores import add_pgn

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "derived_key.py"

# The polyglot format's worked examples: the key after each move of two lines (with an en
# passant capture possible after 4. f5 of the first, and castling rights lost one by one).
LINES = [
    (
        "1. e4 d5 2. e5 f5 3. Ke2 Kf7 *",
        [
            0x463B96181691FC9C,
            0x823C9B50FD114196,
            0x0756B94461C50FB0,
            0x662FAFB965DB29D4,
            0x22A48B5A8E47FF78,
            0x652A607CA3F242C1,
            0x00FDD303C946BDD9,
        ],
    ),
    (
        "1. a4 b5 2. h4 b4 3. c4 bxc3 4. Ra3 *",
        [0x463B96181691FC9C, None, None, None, None, 0x3C8123EA7B067637, None, 0x5C3F9B829B279560],
    ),
]


def pgn(moves: str, n: int) -> str:
    return f'[Event "polyglot {n}"]\n[White "a"]\n[Black "b"]\n[Result "*"]\n\n{moves}\n\n'


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    folder = tmp_path_factory.mktemp("derived_key")
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "polyglot.pgn", "".join(pgn(moves, n) for n, (moves, _) in enumerate(LINES)))
    return store


def test_the_macro_gives_the_published_polyglot_keys(store):
    with duck.memory_connection(store) as con:
        con.execute(zobrist_macro())
        rows = con.execute(
            f"SELECT g.event, p.ply, {DERIVED}, p.position_key FROM positions p JOIN games g USING (game_id) "
            "ORDER BY g.event, p.ply"
        ).fetchall()
    derived = {(event, ply): key for event, ply, key, _ in rows}
    checked = 0
    for n, (_, keys) in enumerate(LINES):
        for ply, key in enumerate(keys):
            if key is not None:
                assert derived[(f"polyglot {n}", ply)] == key, (n, ply, hex(derived[(f"polyglot {n}", ply)]))
                checked += 1
    assert checked == 10
    assert all(key == stored for *_, key, stored in rows)


def test_the_script_checks_every_row_and_answers_each_query_the_same_both_ways(store):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--home", str(store.root)], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert "derived key = stored key on 15 of 15 positions" in out.stdout
    assert out.stdout.count("(same answer)") == 3, out.stdout
