"""The metadata keys the CLI reads (assets/records.py) are the keys the assets write.

The CLI reads an asset's metadata through a record (a dataclass whose fields are the keys);
these tests materialise the assets on a small real store and compare, so a key renamed on one
side fails here rather than in a user's command."""

import inspect

import dagster as dg
import pytest

import assets.datasets
import assets.training
from assets.records import (
    CoverageCheck,
    DatasetMetadata,
    GamesMetadata,
    LabelsMetadata,
    ModelMetadata,
    NoDuplicateLabelsCheck,
    OnePositionPerPlyCheck,
    PositionsMetadata,
    ReconcilesWithFileCheck,
    RejectedGamesMetadata,
    ScoresInRangeCheck,
)
from cli.checks import CHECK_ADVICE
from cli.label import partition_runs_of
from cli.runtime import materialize
from pipeline.store.store import Store
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import materialize_archive


def _written(result) -> tuple[dict[str, set], dict[str, set]]:
    """{asset: metadata keys} of the materialisations and {check: metadata keys} of the checks."""
    assets, checks = {}, {}
    for e in result.get_asset_materialization_events():
        assets.setdefault(e.materialization.asset_key.to_user_string(), set()).update(e.materialization.metadata)
    for c in result.get_asset_check_evaluations():
        checks.setdefault(c.check_name, set()).update(c.metadata)
    return assets, checks


def _assert_reads(record, written: set, source=None) -> None:
    """Every key the record requires is written; every optional one is written here or (for
    those written only in other cases) appears in the asset module's source."""
    missing = record.required_keys() - written
    assert not missing, f"{record.__name__} reads {sorted(missing)}; the asset writes {sorted(written)}"
    for key in set(record.keys().values()) - record.required_keys() - written:
        assert source is not None and f'"{key}"' in inspect.getsource(source), (record.__name__, key)


def test_the_keys_the_cli_reads_are_the_keys_the_assets_write(tmp_path, stockfish):
    from assets.datasets import CONFIGS, dataset_assets
    from assets.labels import LabelsConfig, labels
    from assets.resources import StockfishResource
    from assets.training import TrainRunConfig, model_assets

    store = Store(tmp_path / "store").ensure()
    pgn = tmp_path / "rated.pgn"
    pgn.write_text(RATED_GAMES)
    with dg.instance_for_test() as instance:
        result = materialize_archive(instance, store, store.add_archive(pgn))
        meta, checks = _written(result)
        _assert_reads(GamesMetadata, meta["games"])
        _assert_reads(RejectedGamesMetadata, meta["rejected_games"])
        _assert_reads(PositionsMetadata, meta["positions"])
        _assert_reads(ReconcilesWithFileCheck, checks["reconciles_with_file"])
        _assert_reads(OnePositionPerPlyCheck, checks["one_position_per_ply"])

        for run in partition_runs_of(labels):  # as `chess-pipeline label` runs it
            result = materialize(
                [labels],
                store,
                instance,
                ops={"labels": LabelsConfig()},
                stockfish=StockfishResource(workers=1),
                partition_key=run.get("partition_key"),
                tags=run.get("tags"),
            )
            assert result.success
            meta, checks = _written(result)
            _assert_reads(LabelsMetadata, meta["labels"])
            _assert_reads(CoverageCheck, checks["coverage"])
            _assert_reads(ScoresInRangeCheck, checks["scores_in_range"])
            _assert_reads(NoDuplicateLabelsCheck, checks["no_duplicate_labels"])

        split = {"seed": 0, "val_fraction": 0.25, "test_fraction": 0.25, "min_elo": 0}  # train 28, val 10, test 17
        ops = {
            "sabatelli_3class": CONFIGS["sabatelli_3class"](**split),
            "hui_checkmate": CONFIGS["hui_checkmate"](min_elo=4000),
        }
        result = materialize(dataset_assets, store, instance, selection=list(ops), ops=ops)
        assert result.success
        meta, _ = _written(result)
        searched = assets.datasets  # a searched set's keys are written in its source
        _assert_reads(DatasetMetadata, meta["hui_checkmate"], searched)  # empty (no player over 4000): says why
        assert "empty_reason" in meta["hui_checkmate"] and "empty_reason" not in meta["sabatelli_3class"]
        _assert_reads(DatasetMetadata, meta["sabatelli_3class"] | {"empty_reason"}, searched)

        ops = {"mlp_bitmap_3class": TrainRunConfig(epochs=1)}
        result = materialize(model_assets, store, instance, selection=list(ops), ops=ops)
        assert result.success
        meta, _ = _written(result)
        _assert_reads(ModelMetadata, meta["mlp_bitmap_3class"], source=assets.training)


def test_a_missing_key_names_the_record_the_key_and_what_is_there():
    with pytest.raises(KeyError, match=r"PositionsMetadata: the metadata has no 'bytes_per_position' \(it has rows\)"):
        PositionsMetadata.read({"rows": dg.MetadataValue.int(3)})
    assert PositionsMetadata.read({"rows": 3, "bytes_per_position": dg.MetadataValue.float(13.5)}) == (
        PositionsMetadata(rows=3, bytes_per_position=13.5)
    )
    # A key that is no Python name is declared once, on its field.
    assert ReconcilesWithFileCheck.keys()["games_in_file"] == "games_in_file (python-chess)"


def test_every_check_the_cli_explains_is_a_check_of_the_definitions():
    from assets.definitions import build_defs

    names = {key.name for key in build_defs({}).resolve_asset_graph().asset_check_keys}
    assert set(CHECK_ADVICE) <= names, sorted(set(CHECK_ADVICE) - names)
