"""The baselines every model is scored beside: material counted by hand, the datasets' own
class edges, the majority class of train, a fitted line, and that a training run records them
on its test rows."""

import chess
import duckdb
import numpy as np
import pytest
import torch

from tests.training.test_encoders import batch_of
from training.baselines import baselines, material, material_classes
from training.encoders import Batch


def _with_targets(batch: Batch, targets) -> Batch:
    return Batch(
        batch.planes, batch.white_to_move, batch.castling, batch.mirrored, torch.tensor(targets, dtype=torch.float32)
    )


def test_material_counts_pawns_from_the_encoders_view():
    start = chess.Board()
    rook_up = chess.Board("4k3/8/8/8/8/8/PPPPPPPP/R3K2R w KQ - 0 1")  # White: 8 pawns, 2 rooks; Black: king
    queen_down = chess.Board("3qk3/pppppppp/8/8/8/8/8/4K3 b - - 0 1")  # Black to move: a queen and 8 pawns up
    assert material(batch_of(start, rook_up, queen_down)).tolist() == [0.0, 18.0, -17.0]
    # Mirrored rows (the side to move's view, as Sabatelli's sets encode Black to move): negated.
    assert material(batch_of(queen_down, rook_up, mirrored=[True, True])).tolist() == [17.0, -18.0]


@pytest.mark.parametrize(
    "dataset, pawns, expected",
    [
        # 3 classes at +/-1.5 pawns: win/loss when material is at least 2 pawns apart, else draw.
        ("sabatelli_3class", [-9, -2, -1, 0, 1, 2, 9], [0, 0, 1, 1, 1, 2, 2]),
        ("sabatelli_3class_search", [-9, -2, -1, 0, 1, 2, 9], [0, 0, 1, 1, 1, 2, 2]),  # its test rows are 3class's
        ("lubeck_wdl", [-2, -1, 0, 1, 2], [0, 1, 1, 1, 2]),
        # 15: 0 below -7.5, one class a pawn up to 6 for [-2.5, -1.5), 7 draw, 8 for (1.5, 2.5], 14 above 7.5.
        ("sabatelli_15class", [-20, -8, -7, -2, -1, 0, 1, 2, 7, 8, 20], [0, 0, 1, 6, 7, 7, 7, 8, 13, 14, 14]),
        # 20: the draw region in half pawns, 7..12 = [-1.5,-1), [-1,-0.5), [-0.5,0), [0,0.5), [0.5,1), [1,1.5].
        ("sabatelli_20class", [-8, -2, -1, 0, 1, 2, 8], [0, 6, 8, 10, 12, 13, 19]),
    ],
)
def test_material_rule_uses_each_datasets_own_class_edges(dataset, pawns, expected):
    rule = material_classes(dataset)
    assert [rule[p] for p in pawns] == expected


def test_datasets_without_a_class_rule_have_none():
    assert material_classes("sabatelli_regression") is None and material_classes("deepchess") is None


def test_a_sabatelli_class_sets_target_comes_from_the_macro_its_material_rule_uses():
    """DatasetSpec.class_macro is the material rule's macro, and the macro the set's own SQL file
    makes its target with: a set whose SQL changed its classes would change its rule with it."""
    from pipeline.datasets.datasets import DATASETS
    from pipeline.store.duck import load_sql

    sabatelli = [n for n, spec in DATASETS.items() if n.startswith("sabatelli_") and spec.classes]
    assert len(sabatelli) == 4
    for name in sabatelli:
        spec = DATASETS[name]
        assert f"{spec.class_macro}(score) AS target" in load_sql(f"datasets/{spec.sql or name}"), name


def test_class_baselines_take_trains_majority_and_score_the_rule_on_test():
    even, up_rook = chess.Board(), chess.Board("4k3/pppppppp/8/8/8/8/PPPPPPPP/R3K3 w - - 0 1")
    down_knight = chess.Board("rn2k3/pppppppp/8/8/8/8/PPPPPPPP/R3K3 w - - 0 1")  # White a knight down
    # Train: draws are the majority (3 of 5); test is mostly wins (its own majority would score 3/4).
    train = [_with_targets(batch_of(even, even, even, up_rook, up_rook), [1, 1, 1, 2, 2])]
    test = [_with_targets(batch_of(even, up_rook, up_rook, down_knight), [1, 2, 2, 2])]
    got = baselines("sabatelli_3class", 3, train, test)
    assert got["majority_class"] == 1
    assert got["majority_class_accuracy"] == pytest.approx(1 / 4)  # only the draw
    # Rule: even -> draw (right), rook up -> win (right, twice), knight down -> loss (wrong).
    assert got["material_baseline_accuracy"] == pytest.approx(3 / 4)


def test_regression_baseline_is_a_line_fitted_on_train():
    boards = [chess.Board(), chess.Board("4k3/pppppppp/8/8/8/8/PPPPPPPP/R3K3 w - - 0 1")]  # material 0 and 5
    train = [_with_targets(batch_of(*boards), [0.5, 0.75])]  # target = 0.5 + 0.05 x material
    test = [_with_targets(batch_of(*boards), [0.5, 0.85])]
    got = baselines("sabatelli_regression", 0, train, test, cp_per_unit=3000)
    assert got["material_baseline_intercept"] == pytest.approx(0.5)
    assert got["material_baseline_slope"] == pytest.approx(0.05)
    assert got["material_baseline_mse"] == pytest.approx(0.1**2 / 2)
    assert got["material_baseline_cp_mae"] == pytest.approx(0.05 * 3000)
    assert got["mean_baseline_mse"] == pytest.approx((0.125**2 + 0.225**2) / 2)
    assert np.isfinite(got["mean_baseline_cp_mae"])


def test_a_training_run_records_both_baselines_on_its_own_test_rows(tmp_path, stockfish, fics_2022):
    """The material rule's accuracy as DuckDB's `material` and `sabatelli_class3` macros give it
    over the test file (independent of training/baselines.py), on the rows the model is scored on."""
    from pipeline.datasets.datasets import dataset_dir
    from pipeline.store.duck import load_sql
    from tests.stores import depth1_dataset_store
    from training.train import TrainConfig, train

    store = depth1_dataset_store(tmp_path, fics_2022, stockfish)
    test_file = dataset_dir(store, "sabatelli_3class") / "test.parquet"
    con = duckdb.connect()
    con.execute(load_sql("views/macros"))
    material_rule, majority, rows = con.execute(
        "SELECT avg((sabatelli_class3(100 * CASE WHEN mirrored THEN -material(planes) ELSE material(planes) END)"
        " = target)::INT), avg((target = 1)::INT), count(*) FROM read_parquet(?)",
        [str(test_file)],
    ).fetchone()
    cfg = TrainConfig(store=str(store.root), epochs=1, batch_size=64, threads=1, out=str(tmp_path / "run"))
    result = train(cfg, log=lambda _: None)
    assert result.test["rows"] == rows
    assert result.test["material_baseline_accuracy"] == pytest.approx(material_rule)
    assert result.test["majority_class"] == 1  # draws are most of train in these games
    assert result.test["majority_class_accuracy"] == pytest.approx(majority)
    metrics = {(split, metric) for split, metric, _ in result.metric_rows()}
    assert {("test", "material_baseline_accuracy"), ("test", "majority_class_accuracy")} <= metrics


_HELD = """
import resource, sys
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
from training.baselines import targets_and_material
from training.data import LoaderConfig, ParquetBatches
rows = 600_000
rng = np.random.default_rng(0)
planes = rng.integers(0, 256, (rows, 96), dtype=np.uint8) & rng.integers(0, 256, (rows, 96), dtype=np.uint8)
table = pa.table({
    "planes": pa.FixedSizeBinaryArray.from_buffers(pa.binary(96), rows, [None, pa.py_buffer(planes.tobytes())]),
    "side_to_move": pa.array(np.where(rng.random(rows) < 0.5, "w", "b")),
    "castling": pa.array(np.zeros(rows, np.uint8)),
    "target": pa.array(rng.random(rows, dtype=np.float32)),
    "mirrored": pa.array(rng.random(rows) < 0.5),
})
pq.write_table(table, sys.argv[1], row_group_size=65_536)
del table, planes
batches = ParquetBatches(sys.argv[1], LoaderConfig(batch_size=4096, shuffle=False))
list(batches.epoch(0))  # the reading itself, to the peak it reaches alone
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
y, m = targets_and_material(batches.epoch(0))
assert len(y) == len(m) == rows
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_reading_every_rows_material_keeps_only_what_it_returns(tmp_path):
    """targets_and_material over 600,000 rows grows the process by about the 5 MB it returns, not
    by each batch's tensors: keeping a numpy view of every batch's material tensor held about
    0.7 KB a row (10 GB on the searched set's 5.9M train rows, which every run's test figures
    read for the material line)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _HELD, str(tmp_path / "rows.parquet")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) < 100, f"grew {done.stdout.strip()} MB"
