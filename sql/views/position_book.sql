-- The explorer's figures for the positions each archive reached often, summed at ingest
-- (sql/queries/position_book.sql says what each row holds). Derived from positions: an index
-- that /api/position reads for common positions instead of their games' rows.
CREATE OR REPLACE VIEW position_book AS
SELECT * FROM read_parquet({{parquet:position_book}}, union_by_name = true) WHERE {{store_guard}};

-- position_book with the positions part file each book was made from (`<archive>/data.parquet`,
-- `<archive>/data-0001.parquet`, ...: a book file has its part's name), as positions_by_archive.part.
CREATE OR REPLACE VIEW position_book_by_part AS
SELECT * EXCLUDE (filename), file_part(filename) AS part
FROM read_parquet({{parquet:position_book}}, union_by_name = true, filename = true) WHERE {{store_guard}};
