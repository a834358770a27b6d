-- Which store this DuckDB file belongs to. The views read the store's Parquet files by
-- absolute path; a copy of the file (`cp -a store snapshot`) or a moved store would still
-- read the original store, so in the store's chess.duckdb every Parquet view checks first
-- that the file is open at the path it was built for, and fails saying so otherwise.
-- `chess-pipeline --home DIR sql ...` rebuilds the file for the store in DIR.
-- (In the in-memory sessions of runs, chess_store_file() is NULL and the views carry no
-- check: they are built from the store's own path each time.)
CREATE OR REPLACE MACRO chess_store_file() AS {{store_file}};

-- Which version of sql/views built the file (duck.views_version): another one is rebuilt.
CREATE OR REPLACE MACRO chess_views_version() AS {{views_version}};

CREATE OR REPLACE MACRO chess_store_guard() AS (
    SELECT CASE WHEN bool_or(path = chess_store_file()) THEN true
           ELSE error('this chess.duckdb was built at ' || chess_store_file() || ' and is open at '
                      || coalesce(string_agg(path, ', '), 'another path')
                      || ' (copied or moved): its views would read the store it was built for. Rebuild them for '
                      || 'the store it is in: chess-pipeline --home <that folder> sql "SELECT 1"') END
    FROM duckdb_databases() WHERE path IS NOT NULL
);
