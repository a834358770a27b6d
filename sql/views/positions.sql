-- One row per mainline position (ply 0 .. N of every game), planes packed as 96 bytes.
CREATE OR REPLACE VIEW positions AS
SELECT * FROM read_parquet({{parquet:positions}}, union_by_name = true) WHERE {{store_guard}};

-- positions with the archive each row's file is the partition of, and the part file it is in
-- (`<archive>/data.parquet`, `<archive>/data-0001.parquet`, ...: an archive of more than
-- IngestConfig.part_positions positions has several). A filter on `archive` or `part` (a
-- constant or a bound list) is applied to the file names, so the other files are never opened:
-- the explorer reads a part's rows only where its position book lacks the position. (The schema
-- file outside any archive= folder reads as archive ''.)
CREATE OR REPLACE VIEW positions_by_archive AS
SELECT * EXCLUDE (filename), file_archive(filename) AS archive, file_part(filename) AS part
FROM read_parquet({{parquet:positions}}, union_by_name = true, filename = true) WHERE {{store_guard}};
