-- The headers of some games, by game_id: the explorer's strongest games of a position. The ids
-- are a typed list in list_contains, which DuckDB checks against each games row group's Bloom
-- filter (pipeline/ingest/ingest.py BLOOM), so only the row groups holding them are read (a
-- join with the games view read the game_id of every game of the store).
SELECT game_id, archive, white, black, white_elo, black_elo, outcome AS result, date, event, ply_count
FROM games
WHERE list_contains(CAST($game_ids AS BIGINT[]), game_id);
