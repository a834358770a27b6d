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


def _executable(path: Path, text: str) -> str:
    """Write a wrapper script and make it executable; its path."""
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def faulty_stockfish(
    folder: Path, stockfish: str, mode: Literal["garbage", "crash"], n: int, every: bool = False
) -> str:
    """An executable wrapper around the real engine whose n-th `Final evaluation` line (counted
    over every `eval` it answers; with `every`, each one from the n-th on) is mangled or never
    comes; its path. Each fault adds a line to the file at the path + '.faults'."""
    path = folder / f"stockfish-{mode}-{n}{'-on' if every else ''}"
    marker = f"{path}.faults"
    text = FINAL_EVALUATION_FAULT.format(
        python=sys.executable, stockfish=stockfish, mode=mode, n=n, every=every, marker=marker
    )
    return _executable(path, text)


SEARCH_FAULT = '''#!{python}
"""Stockfish, each search of a position in {fens!r} answered with a fault ({mode}) the first
{times} time(s) (counted over every process of this wrapper, in the marker file):
nobestmove: its `info` lines, then a junk line where `bestmove` was due (the engine lives on);
exit: its `info` lines, then the wrapper exits (code 0) without `bestmove`;
crash: its `info` lines, then the engine and the wrapper die (SIGKILL);
hang: its `info` lines, then nothing more, whatever it is sent."""
import os, signal, subprocess, sys, threading, time
from collections import deque
sf = subprocess.Popen([{stockfish!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
searched = deque()  # the FEN of each `go` sent, in order: Stockfish answers them in that order
lock = threading.Lock()

def forward():
    fen = None
    for line in sys.stdin.buffer:
        if line.startswith(b"position fen "):
            fen = line[len(b"position fen "):].decode().strip()
        elif line.startswith(b"go "):
            with lock:
                searched.append(fen)
        try:
            sf.stdin.write(line)
        except OSError:
            return
    sf.stdin.close()

threading.Thread(target=forward, daemon=True).start()

def faults():
    try:
        with open({marker!r}) as m:
            return len(m.read().splitlines())
    except FileNotFoundError:
        return 0

out = sys.stdout.buffer
for line in sf.stdout:
    if line.startswith(b"bestmove"):
        with lock:
            fen = searched.popleft() if searched else None
        if fen in {fens!r} and faults() < {times}:
            with open({marker!r}, "a") as m:
                m.write("{mode}\\n")
            if {mode!r} == "nobestmove":
                line = b"junk instead of bestmove\\n"
            elif {mode!r} == "exit":
                sf.kill()
                os._exit(0)  # (not sys.exit: the stdin thread holds its buffer's lock)
            elif {mode!r} == "hang":
                sf.kill()
                time.sleep(3600)
            else:
                sf.kill()
                os.kill(os.getpid(), signal.SIGKILL)
    out.write(line)
    out.flush()
'''


def search_fault_stockfish(
    folder: Path,
    stockfish: str,
    fens: str | tuple[str, ...],
    mode: Literal["nobestmove", "exit", "crash", "hang"],
    times: int = 1,
) -> str:
    """An executable wrapper around the real engine whose searches of `fens` (each FEN exactly as
    `position fen` sends it) end in the fault `mode`, the first `times` times, counted over every
    process of the wrapper (a restarted engine too); its path. Each fault adds a line to the file
    at the path + '.faults'."""
    fens = (fens,) if isinstance(fens, str) else tuple(fens)
    path = folder / f"stockfish-{mode}-{times}"
    marker = f"{path}.faults"
    text = SEARCH_FAULT.format(
        python=sys.executable, stockfish=stockfish, fens=fens, mode=mode, times=times, marker=marker
    )
    return _executable(path, text)
