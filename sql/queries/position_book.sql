-- A position book (pipeline/ingest/book.py): for every position whose key has at least $min_rows
-- rows in the positions part file $positions (one of an archive's), the figures the explorer
-- shows, summed over that part's games (queries/explorer_position.sql adds them to the figures
-- it counts from other parts' rows, so each row here means exactly what the explorer counts):
--   reached: games that reached the position (each once), by outcome and by the players'
--            average Elo rounded down to $elo_step (NULL: either player unrated);
--   move:    games that played a move from it (a game once per move), by move and outcome,
--            with the sum of their average Elo and how many were rated;
--   top:     its $top strongest games (white_elo + black_elo, unrated last, then game_id),
--            each with the ply at which it first reached the position.
-- Every position of a key that qualifies is in the book, whole: the explorer reads a position
-- either here or from the part's positions file, never both. One run makes the rows of the
-- keys from $lowest_key to $highest_key (a large part's book is made a key range at a time,
-- so that DuckDB's memory holds one range's positions).
WITH hits AS (
    SELECT position_key, planes, side_to_move, castling, ep_square, game_id, ply, move_uci, result,
           CASE WHEN white_elo > 0 AND black_elo > 0 THEN white_elo + black_elo END AS strength
    FROM read_parquet($positions)
    WHERE position_key BETWEEN $lowest_key AND $highest_key AND position_key IN (
        SELECT position_key FROM read_parquet($positions)
        WHERE position_key BETWEEN $lowest_key AND $highest_key
        GROUP BY position_key HAVING count(*) >= $min_rows
    )
), reached AS (
    SELECT position_key, planes, side_to_move, castling, ep_square, game_id, min(ply) AS ply,
           any_value(result) AS result, any_value(strength) AS strength
    FROM hits
    GROUP BY position_key, planes, side_to_move, castling, ep_square, game_id
), book AS (
    SELECT position_key, planes, side_to_move, castling, ep_square, 'reached' AS kind, NULL AS move_uci, result,
           CAST(floor(strength / (2 * $elo_step)) * $elo_step AS INTEGER) AS elo_floor, count(*) AS games,
           NULL AS elo_sum, NULL AS rated, NULL AS game_id, NULL AS ply, NULL AS strength
    FROM reached
    GROUP BY position_key, planes, side_to_move, castling, ep_square, result, elo_floor
    UNION ALL BY NAME
    SELECT position_key, planes, side_to_move, castling, ep_square, 'move' AS kind, move_uci, result,
           count(*) AS games, sum(strength / 2.0) AS elo_sum, count(strength) AS rated
    FROM (SELECT DISTINCT position_key, planes, side_to_move, castling, ep_square, game_id, move_uci, result, strength
          FROM hits WHERE move_uci IS NOT NULL)
    GROUP BY position_key, planes, side_to_move, castling, ep_square, move_uci, result
    UNION ALL BY NAME
    SELECT position_key, planes, side_to_move, castling, ep_square, 'top' AS kind, g.result, 1 AS games,
           g.game_id, g.ply, g.strength
    FROM (
        SELECT position_key, planes, side_to_move, castling, ep_square,
               unnest(max_by({'game_id': game_id, 'ply': ply, 'result': result, 'strength': strength},
                             {'s': coalesce(strength, -1), 'g': -game_id}, $top)) AS g
        FROM reached
        GROUP BY position_key, planes, side_to_move, castling, ep_square
    )
)
SELECT $archive AS archive, position_key, planes, side_to_move, castling, ep_square, kind, move_uci, result,
       elo_floor, games, elo_sum, rated, game_id, ply, strength
FROM book
ORDER BY position_key, planes, side_to_move, castling, ep_square, kind, move_uci, result, elo_floor, game_id;
