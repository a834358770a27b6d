"""Evaluation of Team 44's piece-value networks: one asset per piece-value model asset.

eval_piece_values_<model> loads the checkpoint its model asset last materialised (lineage),
values every piece of the test split the model was trained on (training.piece_values), and
writes the average value per piece type (pawn = 1) beside Team 44's and the book's, the values
per game phase (table and chart), and the test error beside the book-material baseline, into
evaluation_results (suite `piece_values`) and reports/evaluation/<model>/. The piece-value
models that have a published-split copy (`published_split_<model>`, assets.reproduce) get the same
evaluation of that copy, eval_piece_values_published_split_<model>, its rows under the copy's name
(its test split is the published one: positions split one by one, no leakage guard).
"""

import dagster as dg

from assets.config import DescribedConfig
from assets.metadata import png_md
from assets.resources import StoreResource
from assets.shared import EVALUATION_GROUP as GROUP
from assets.shared import MODEL_TAG, REPRODUCTION_GROUP, SPLIT_MODELS, checkpoint_of, report_dir, write_png
from pipeline.play.evaluation import write_results
from pipeline.research.reproduction import on_published_split
from pipeline.store.store_files import atomic_path
from training.catalog import PIECE_VALUE_MODELS
from training.choices import Device


class PieceValuesEvalConfig(DescribedConfig):
    max_rows: int = 0
    """Test positions to value (0: all of the split)."""
    device: Device = "auto"
    """auto: CUDA when present, else the CPU."""


def piece_values_eval_asset(model: str, group: str = GROUP) -> dg.AssetsDefinition:
    """eval_piece_values_<model>, for a piece-value model asset or its published-split copy."""
    name = f"eval_piece_values_{model}"

    @dg.asset(
        name=name,
        group_name=group,
        deps=[model],
        tags={MODEL_TAG: model},
        description=f"{model}: average value per piece type (pawn = 1) beside Team 44's, per game phase, and the "
        "test error beside the book-material baseline, on the test split the model was trained beside.",
    )
    def _eval(context: dg.AssetExecutionContext, config: PieceValuesEvalConfig, store: StoreResource):
        from pipeline.plots import piece_values_png
        from pipeline.research.published import TEAM44
        from training.piece_values import evaluate_checkpoint
        from training.train import resolve_device

        st = store.get()
        report, _ = evaluate_checkpoint(checkpoint_of(context, model), config.max_rows, resolve_device(config.device))
        if not report.rows:
            raise dg.Failure(f"{model}: its test split has no rows with a target to evaluate")
        write_results(st, name, context.run.run_id, [(model, *r) for r in report.result_rows()])
        png = piece_values_png(report.by_phase, TEAM44, f"{model}: piece values by game phase (pawn = 1 overall)")
        out = report_dir(st, model)
        write_png(out / "piece_values_by_phase.png", png)
        text = (
            f"# {model}: piece values\n\n{report.table_md()}\n\n## By game phase (pawn = 1 over all phases)\n\n"
            f"{report.phase_md()}\n\n## Test error\n\n{report.error_md()}\n"
        )
        path = out / "piece_values.md"
        with atomic_path(path) as tmp:
            tmp.write_text(text)
        context.log.info(f"{model}: {report.table_md()}")
        return dg.MaterializeResult(
            metadata={
                "piece_values": dg.MetadataValue.md(report.table_md()),
                "by_phase": dg.MetadataValue.md(report.phase_md()),
                "by_phase_chart": png_md(png, "piece values by game phase"),
                "test_error": dg.MetadataValue.md(report.error_md()),
                "split_protocol": report.protocol,
                "test_positions": report.rows,
                "value_intervals": dg.MetadataValue.json(
                    {
                        t: {"value": report.relative[t], "low95": lo, "high95": hi, "games": report.interval_games}
                        for t, (lo, hi) in report.intervals.items()
                    }
                ),
                "test_mae": round(report.mae, 4),
                "baseline_mae": round(report.baseline_mae, 4),
                "report": dg.MetadataValue.path(str(path)),
            }
        )

    return _eval


piece_values_assets = [piece_values_eval_asset(m) for m in PIECE_VALUE_MODELS] + [
    piece_values_eval_asset(on_published_split(m), REPRODUCTION_GROUP) for m in PIECE_VALUE_MODELS if m in SPLIT_MODELS
]
