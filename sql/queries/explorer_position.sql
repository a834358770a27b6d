-- Opening explorer: what the store's games say about one position, in one scan of positions.
-- A position is matched in full (key, planes, side to move, castling, en passant), so a
-- Zobrist collision never mixes two positions; with $placement_only, on its pieces alone
-- ($keys holds the key of every side to move / castling / en passant the placement allows,
-- planes the placement). One row:
--   bands: games that reached the position (each once) by rating band of the players'
--          average Elo (band = its lower edge, clamped to [$lowest, $highest]; 'unrated' when
--          either player has no rating); the band NULL row is every game: the explorer's count;
--   moves: the moves played from it, each with its games (a game counts once per move) and results;
--   games: the $limit strongest games that reached it (average Elo, unrated last), with the
--          ply at which each first reached it.
-- The keys are a typed list in list_contains, which DuckDB checks against each positions row
-- group's Bloom filter (pipeline/ingest/ingest.py POSITIONS_BLOOM), so only the row groups that
-- may hold the position are read; `IN (SELECT unnest($keys))` was a join that read every key.
WITH hits AS MATERIALIZED (
    SELECT game_id, ply, move_uci, result, white_elo, black_elo
    FROM positions
    WHERE list_contains(CAST($keys AS UBIGINT[]), position_key) AND planes = $planes
      AND ($placement_only
           OR (side_to_move = $side AND castling = $castling AND ep_square IS NOT DISTINCT FROM $ep))
), reached AS (
    SELECT game_id, min(ply) AS ply, any_value(result) AS result,
           any_value(white_elo) AS white_elo, any_value(black_elo) AS black_elo
    FROM hits
    GROUP BY game_id
), bands AS (
    SELECT band,
           count(*) AS games,
           count(*) FILTER (WHERE result = '1-0') AS white_wins,
           count(*) FILTER (WHERE result = '1/2-1/2') AS draws,
           count(*) FILTER (WHERE result = '0-1') AS black_wins
    FROM (
        SELECT result,
               CASE WHEN coalesce(white_elo, 0) <= 0 OR coalesce(black_elo, 0) <= 0 THEN 'unrated'
                    ELSE CAST(least(greatest(CAST(floor((white_elo + black_elo) / (2.0 * $width)) AS INTEGER) * $width,
                                             $lowest), $highest) AS VARCHAR)
               END AS band
        FROM reached
    )
    GROUP BY GROUPING SETS ((), (band))
), moves AS (
    SELECT move_uci,
           count(DISTINCT game_id) AS games,
           count(DISTINCT game_id) FILTER (WHERE result = '1-0') AS white_wins,
           count(DISTINCT game_id) FILTER (WHERE result = '1/2-1/2') AS draws,
           count(DISTINCT game_id) FILTER (WHERE result = '0-1') AS black_wins,
           CAST(round(avg((white_elo + black_elo) / 2.0) FILTER (WHERE white_elo > 0 AND black_elo > 0)) AS INTEGER)
               AS average_elo
    FROM hits
    WHERE move_uci IS NOT NULL
    GROUP BY move_uci
), top AS (
    SELECT game_id, ply
    FROM reached
    ORDER BY CASE WHEN white_elo > 0 AND black_elo > 0 THEN white_elo + black_elo END DESC NULLS LAST, game_id
    LIMIT $limit
)
SELECT
    (SELECT list(b ORDER BY b.band IS NOT NULL, b.band = 'unrated', TRY_CAST(b.band AS INTEGER)) FROM bands b) AS bands,
    (SELECT list(m ORDER BY m.games DESC, m.move_uci) FROM moves m) AS moves,
    (SELECT list(struct_pack(game_id := g.game_id, ply := t.ply, archive := g.archive, white := g.white,
                             black := g.black, white_elo := g.white_elo, black_elo := g.black_elo,
                             result := g.outcome, date := g.date, event := g.event, ply_count := g.ply_count)
                 ORDER BY CASE WHEN g.white_elo > 0 AND g.black_elo > 0 THEN g.white_elo + g.black_elo END
                          DESC NULLS LAST, g.game_id)
     FROM top t JOIN games g USING (game_id)) AS games;
