"""benchmarks/search_positions.py on a few real games: the baseline loop and ours draw the same
children, and each is timed against the baseline. (Four games are one drawing task, so 'ours, 2
processes' draws here too; tests/pipeline/test_search_positions.py draws in two processes.)"""

import re
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "search_positions.py"


def test_the_drawing_is_timed_against_the_old_loop_with_the_same_children(fics_2022):
    args = ["--archive", str(fics_2022), "--games", "4", "--workers", "2"]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=True
    ).stdout
    rows = re.findall(r"^ *(.+?): +[\d.]+ s, +[\d,]+ rows/s, ([\d,]+) children, ([\d.]+)x the baseline$", out, re.M)
    assert [r[0] for r in rows] == ["baseline", "ours, 1 process", "ours, 2 processes"], out
    assert len({r[1] for r in rows}) == 1 and int(rows[0][1].replace(",", "")) > 100, out
    assert rows[0][2] == "1.00" and "NOT THE SAME" not in out


def test_children_that_differ_from_the_baselines_fail_the_benchmark(fics_2022, tmp_path):
    """The check has teeth: a drawing with another seed than the baseline's exits 1."""
    patched = tmp_path / "search_positions.py"
    patched.write_text(
        SCRIPT.read_text().replace("children(fens, args.children, 1, h, 1)", "children(fens, args.children, 2, h, 1)")
    )
    r = subprocess.run(
        [sys.executable, str(patched), "--archive", str(fics_2022), "--games", "2", "--workers", "1"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 1 and "ours, 1 process" in r.stdout and "NOT THE SAME CHILDREN" in r.stdout
