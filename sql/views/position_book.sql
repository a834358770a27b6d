-- The explorer's figures for the positions each archive reached often, summed at ingest
-- (sql/queries/position_book.sql says what each row holds). Derived from positions: an index
-- that /api/position reads for common positions instead of their games' rows.
-- Each part file of an archive's positions has its own book, of the same name: `part` says
-- which (`<archive>/data.parquet`, ..., as positions_by_archive.part).
CREATE OR REPLACE VIEW position_book AS
SELECT * EXCLUDE (filename), regexp_extract(filename, '/archive=([^/]+/[^/]+)$', 1) AS part
FROM read_parquet({{parquet:position_book}}, union_by_name = true, filename = true) WHERE {{store_guard}};
