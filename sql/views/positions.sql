-- One row per mainline position (ply 0 .. N of every game), planes packed as 96 bytes.
CREATE OR REPLACE VIEW positions AS
SELECT * FROM read_parquet({{parquet:positions}}, union_by_name = true) WHERE {{store_guard}};
