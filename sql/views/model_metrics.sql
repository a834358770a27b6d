-- Metrics of every trained model, one row each: model, dataset, split, metric (accuracy,
-- loss, majority_class_accuracy, mse, mae, cp_mae, positions_per_second, rows), value,
-- run_id, materialised_at. The newest run of a model:
--   SELECT * FROM model_metrics QUALIFY materialised_at = max(materialised_at) OVER (PARTITION BY model);
CREATE OR REPLACE VIEW model_metrics AS
SELECT * FROM read_parquet({{parquet:model_metrics}}, union_by_name = true) WHERE {{store_guard}};
