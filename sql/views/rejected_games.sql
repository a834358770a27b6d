-- Games that could not be replayed, with the reason and an excerpt of their text.
CREATE OR REPLACE VIEW rejected_games AS
SELECT * FROM read_parquet({{parquet:rejected_games}}, union_by_name = true) WHERE {{store_guard}};
