"""Direct engine calls: the independent facts tests check the project's engine code against."""

import stat
import subprocess
import sys
from pathlib import Path
from typing import Literal


def static_cp(stockfish: str, fen: str) -> int:
    """Stockfish's `eval` (White's view, centipawns) straight from the engine, one process a call."""
    out = subprocess.run(
        [stockfish], input=f"position fen {fen}\neval\nquit\n", capture_output=True, text=True, timeout=30
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("Final evaluation"))
    return round(float(line.split()[2]) * 100)


FINAL_EVALUATION_FAULT = '''#!{python}
"""Stockfish, its `Final evaluation` line number {n} {mode}: garbage (its figure mangled) or crash
(the engine and this wrapper end there, exit code 3)."""
import subprocess, sys
sf = subprocess.Popen([{stockfish!r}], stdin=sys.stdin, stdout=subprocess.PIPE)
seen = 0
for line in sf.stdout:
    if line.startswith(b"Final evaluation"):
        seen += 1
        if seen == {n} or ({every} and seen > {n}):
            with open({marker!r}, "a") as m:  # so a test can tell the fault happened
                m.write("{mode}\\n")
            if {mode!r} == "crash":
                sf.kill()
                sys.exit(3)
            line = b"Final evaluation       +zz.q (white side)\\n"
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
'''


def faulty_stockfish(
    folder: Path, stockfish: str, mode: Literal["garbage", "crash"], n: int, every: bool = False
) -> str:
    """An executable wrapper around the real engine whose n-th `Final evaluation` line (counted
    over every `eval` it answers; with `every`, each one from the n-th on) is mangled or never
    comes; its path. Each fault adds a line to the file at the path + '.faults'."""
    path = folder / f"stockfish-{mode}-{n}{'-on' if every else ''}"
    marker = f"{path}.faults"
    path.write_text(
        FINAL_EVALUATION_FAULT.format(
            python=sys.executable, stockfish=stockfish, mode=mode, n=n, every=every, marker=marker
        )
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)
