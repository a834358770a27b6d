-- Every model's newest test figures beside its baselines, measured on the same test rows
-- (training/baselines.py): a classifier's accuracy beside the majority class of train and the
-- material rule (100 x material in pawns, from the side to move's view where the set mirrors,
-- put into the dataset's classes: for 3 classes win/loss at 2 pawns apart, else draw); a
-- regression model's MSE beside train's mean and the material line fitted on train.
-- lead_pct / lead_mse: how far the model is ahead of the better baseline (negative: behind).
WITH newest AS (
    SELECT model, dataset, metric, value FROM model_metrics
    WHERE split = 'test'
    QUALIFY materialised_at = max(materialised_at) OVER (PARTITION BY model)
), wide AS (
    SELECT model, dataset,
           max(value) FILTER (WHERE metric = 'rows') AS test_rows,
           max(value) FILTER (WHERE metric = 'accuracy') AS accuracy,
           max(value) FILTER (WHERE metric = 'majority_class_accuracy') AS majority,
           max(value) FILTER (WHERE metric = 'material_baseline_accuracy') AS material,
           max(value) FILTER (WHERE metric = 'mse') AS mse,
           max(value) FILTER (WHERE metric = 'mean_baseline_mse') AS mean_mse,
           max(value) FILTER (WHERE metric = 'material_baseline_mse') AS material_mse
    FROM newest GROUP BY model, dataset
)
SELECT model, dataset, test_rows::BIGINT AS test_rows,
       round(100 * accuracy, 2) AS accuracy_pct,
       round(100 * majority, 2) AS majority_class_pct,
       round(100 * material, 2) AS material_rule_pct,
       round(100 * (accuracy - greatest(majority, coalesce(material, majority))), 2) AS lead_pct,
       round(mse, 5) AS mse,
       round(mean_mse, 5) AS train_mean_mse,
       round(material_mse, 5) AS material_line_mse,
       round(least(mean_mse, coalesce(material_mse, mean_mse)) - mse, 5) AS lead_mse
FROM wide ORDER BY model;
