-- Evaluation figures of the models, one row each: model, suite (a test suite, or the opponent
-- of a match), metric, value, n (games or positions counted), detail, the asset and run that
-- made it, materialised_at. evaluation_history holds every run; evaluation_results the rows of
-- the newest run of each asset (a materialisation replaces its asset's figures as a whole, so
-- a player or suite that is gone from it is gone from here).
CREATE OR REPLACE VIEW evaluation_history AS
SELECT * FROM read_parquet({{parquet:evaluation_results}}, union_by_name = true) WHERE {{store_guard}};

CREATE OR REPLACE VIEW evaluation_results AS
SELECT model, suite, metric, value, n, detail, asset, run_id, materialised_at
FROM evaluation_history
QUALIFY run_id = first_value(run_id) OVER (PARTITION BY asset ORDER BY materialised_at DESC);

-- Every game the evaluation matches played (the newest run of each match asset): match,
-- white, black, result, termination, plies, opening, round, the PGN file holding it.
CREATE OR REPLACE VIEW match_games AS
SELECT * FROM read_parquet({{parquet:match_games}}, union_by_name = true) WHERE {{store_guard}}
QUALIFY run_id = first_value(run_id) OVER (PARTITION BY asset ORDER BY materialised_at DESC);
