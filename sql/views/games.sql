-- One row per game that replayed cleanly (see the store contract in ARCHITECTURE.md).
CREATE OR REPLACE VIEW games AS
SELECT * FROM read_parquet({{parquet:games}}, union_by_name = true) WHERE {{store_guard}};
