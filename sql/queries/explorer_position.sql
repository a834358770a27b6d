-- Opening explorer: what the store's games say about one position.
-- A position is matched in full (key, planes, side to move, castling, en passant), so a
-- Zobrist collision never mixes two positions; with $placement_only, on its pieces alone
-- ($keys holds the key of every side to move / castling / en passant the placement allows,
-- planes the placement). One row:
--   bands: games that reached the position (each once) by rating band of the players'
--          average Elo (band = its lower edge, clamped to [$lowest, $highest]; 'unrated' when
--          either player has no rating); the band NULL row is every game: the explorer's count;
--   moves: the moves played from it, each with its games (a game counts once per move), results
--          and the average Elo of those games (both players rated);
--   games: the $limit strongest games that reached it (average Elo, unrated last), with the
--          ply at which each first reached it (game_id and ply: queries/explorer_top_games.sql
--          reads their headers by id, where the games files' Bloom filters point).
-- Where the position is in a part file's position book (sql/queries/position_book.sql), that
-- part's figures come from the book's rows ($book_parts: the parts whose book has the
-- position, which explorer.queries.book_parts finds first), and its positions file is not
-- opened (positions_by_archive filters files by name); every other part's figures are
-- counted from its position rows here, the same way the book counted them (a game lies in one
-- part). With $placement_only the book is not used ($book_parts is empty): it sums each full position.
-- The keys are a typed list in list_contains, which DuckDB checks against each positions row
-- group's Bloom filter (pipeline/ingest/ingest.py BLOOM), so only the row groups that
-- may hold the position are read; `IN (SELECT unnest($keys))` was a join that read every key.
-- Average Elo is kept rounded down to $elo_step, of which the band $width is a multiple.
WITH hits AS MATERIALIZED (
    SELECT game_id, ply, move_uci, result,
           CASE WHEN white_elo > 0 AND black_elo > 0 THEN white_elo + black_elo END AS strength
    FROM positions_by_archive
    WHERE list_contains(CAST($keys AS UBIGINT[]), position_key) AND planes = $planes
      AND ($placement_only
           OR (side_to_move = $side AND castling = $castling AND ep_square IS NOT DISTINCT FROM $ep))
      AND NOT list_contains(CAST($book_parts AS VARCHAR[]), part)
), book AS MATERIALIZED (
    SELECT kind, move_uci, result, elo_floor, games, elo_sum, rated, game_id, ply, strength
    FROM position_book_by_part
    WHERE NOT $placement_only AND list_contains(CAST($keys AS UBIGINT[]), position_key) AND planes = $planes
      AND side_to_move = $side AND castling = $castling AND ep_square IS NOT DISTINCT FROM $ep
      AND list_contains(CAST($book_parts AS VARCHAR[]), part)
), reached AS (
    SELECT game_id, min(ply) AS ply, any_value(result) AS result, any_value(strength) AS strength
    FROM hits
    GROUP BY game_id
), counted AS (
    SELECT result, CAST(floor(strength / (2 * $elo_step)) * $elo_step AS INTEGER) AS elo_floor, 1 AS games
    FROM reached
    UNION ALL
    SELECT result, elo_floor, games FROM book WHERE kind = 'reached'
), bands AS (
    SELECT band,
           CAST(coalesce(sum(games), 0) AS BIGINT) AS games,
           CAST(coalesce(sum(games) FILTER (WHERE result = '1-0'), 0) AS BIGINT) AS white_wins,
           CAST(coalesce(sum(games) FILTER (WHERE result = '1/2-1/2'), 0) AS BIGINT) AS draws,
           CAST(coalesce(sum(games) FILTER (WHERE result = '0-1'), 0) AS BIGINT) AS black_wins
    FROM (
        SELECT result, games,
               CASE WHEN elo_floor IS NULL THEN 'unrated'
                    ELSE CAST(least(greatest(CAST(floor(elo_floor / $width) AS INTEGER) * $width, $lowest), $highest)
                              AS VARCHAR)
               END AS band
        FROM counted
    )
    GROUP BY GROUPING SETS ((), (band))
), played AS (
    SELECT move_uci, result, 1 AS games, strength / 2.0 AS elo_sum, CAST(strength IS NOT NULL AS INTEGER) AS rated
    FROM (SELECT DISTINCT game_id, move_uci, result, strength FROM hits WHERE move_uci IS NOT NULL)
    UNION ALL
    SELECT move_uci, result, games, elo_sum, rated FROM book WHERE kind = 'move'
), moves AS (
    SELECT move_uci,
           CAST(sum(games) AS BIGINT) AS games,
           CAST(coalesce(sum(games) FILTER (WHERE result = '1-0'), 0) AS BIGINT) AS white_wins,
           CAST(coalesce(sum(games) FILTER (WHERE result = '1/2-1/2'), 0) AS BIGINT) AS draws,
           CAST(coalesce(sum(games) FILTER (WHERE result = '0-1'), 0) AS BIGINT) AS black_wins,
           CAST(round(sum(elo_sum) / nullif(sum(rated), 0)) AS INTEGER) AS average_elo
    FROM played
    GROUP BY move_uci
), top AS (
    SELECT game_id, ply, strength
    FROM (SELECT game_id, ply, strength FROM reached
          UNION ALL
          SELECT game_id, ply, strength FROM book WHERE kind = 'top')
    ORDER BY strength DESC NULLS LAST, game_id
    LIMIT $limit
)
SELECT
    (SELECT list(b ORDER BY b.band IS NOT NULL, b.band = 'unrated', TRY_CAST(b.band AS INTEGER)) FROM bands b) AS bands,
    (SELECT list(m ORDER BY m.games DESC, m.move_uci) FROM moves m) AS moves,
    (SELECT list(struct_pack(game_id := t.game_id, ply := t.ply) ORDER BY t.strength DESC NULLS LAST, t.game_id)
     FROM top t) AS games;
