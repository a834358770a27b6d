-- The explorer's figures for the positions each archive reached often, summed at ingest
-- (sql/queries/position_book.sql says what each row holds). Derived from positions: an index
-- that /api/position reads for common positions instead of their games' rows.
CREATE OR REPLACE VIEW position_book AS
SELECT * FROM read_parquet({{parquet:position_book}}, union_by_name = true) WHERE {{store_guard}};
