-- Stockfish labels, append-only: one row per distinct position and engine setting
-- (engine name + version, limit_kind, limit_value). cp / mate / score are from White's
-- point of view; mate = 0 means the side to move is checkmated (score says who won).
CREATE OR REPLACE VIEW labels AS
SELECT * FROM read_parquet({{parquet:labels}}, union_by_name = true) WHERE {{store_guard}};
