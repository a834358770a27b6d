"""Stockfish static evaluations for DeepChess's Experiment 1 (no torch, no Dagster).

The experiment buckets positions by Stockfish's static evaluation (`chess-pipeline label
--static` stores it as labels of limit `static`). `static_evals` gives one per row of a split
file: the store's static label where there is one, else asked of the engine pool now (the same
`eval` command, so the same number a label would hold; not written to the store: an evaluation
reads the store). A position in check has no static evaluation (NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from pipeline.ingest.encoding import fen_from_row
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Evaluation, Job, Limit
from pipeline.store.duck import load_sql, memory_connection
from pipeline.store.store import Store


@dataclass
class StaticEvals:
    cp: np.ndarray
    """White's static evaluation of each row (float, NaN: none)."""
    from_labels: int
    """Rows whose value came from the store's static labels."""
    from_engine: int
    """Rows evaluated by the pool now."""
    missing: int
    """Rows with none (in check, or the engine failed)."""


def static_evals(store: Store, split: Path, rows: int, pool: EnginePool | None) -> StaticEvals:
    """Static evaluations of the first `rows` rows of a split file (see the module docstring);
    without a pool only the store's labels are used."""
    with memory_connection(store) as con:
        got = con.sql(load_sql("queries/static_evals"), params={"path": str(split), "rows": rows}).fetchall()
    cp = np.full(rows, np.nan)
    for row, value in got:
        if value is not None:
            cp[row] = value
    from_labels = int(np.isfinite(cp).sum())
    todo = np.flatnonzero(~np.isfinite(cp))
    from_engine = 0
    if pool is not None and len(todo):
        t = pq.read_table(
            split, columns=["planes", "side_to_move", "castling", "ep_square", "halfmove_clock", "fullmove_number"]
        ).slice(0, rows)
        cols = {c: t.column(c).to_pylist() for c in t.column_names}
        jobs = [
            Job(
                int(i),
                fen_from_row(
                    *(
                        cols[c][i]
                        for c in (
                            "planes",
                            "side_to_move",
                            "castling",
                            "ep_square",
                            "halfmove_clock",
                            "fullmove_number",
                        )
                    )
                ),
                cols["side_to_move"][i] == "w",
            )
            for i in todo
        ]
        for r in pool.run(jobs, Limit("static")):
            if isinstance(r, Evaluation) and r.cp is not None:
                cp[r.job.id] = r.cp
                from_engine += 1
    return StaticEvals(cp, from_labels, from_engine, int((~np.isfinite(cp)).sum()))
