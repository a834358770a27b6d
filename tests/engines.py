"""Direct engine calls: the independent facts tests check the project's engine code against."""

import subprocess


def static_cp(stockfish: str, fen: str) -> int:
    """Stockfish's `eval` (White's view, centipawns) straight from the engine, one process a call."""
    out = subprocess.run(
        [stockfish], input=f"position fen {fen}\neval\nquit\n", capture_output=True, text=True, timeout=30
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("Final evaluation"))
    return round(float(line.split()[2]) * 100)
