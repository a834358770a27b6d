-- DeepChess: positions of decisive games only, `per_game` of them per game drawn at random
-- (a hash of sample_seed, game and ply orders them), never from the first `skip_moves` moves,
-- never a position reached by a capture. winner: 'white' / 'black'; target 1 = White won.
-- Pairs (one from a White win, one from a Black win) are drawn at training time.
WITH candidates AS (
    SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
           p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
           CASE g.outcome WHEN '1-0' THEN 'white' ELSE 'black' END AS winner,
           row_number() OVER (PARTITION BY p.game_id
                              ORDER BY md5($sample_seed::VARCHAR || ':' || p.game_id::VARCHAR || ':' || p.ply::VARCHAR)) AS draw
    FROM positions p
    JOIN games g USING (game_id)
    WHERE g.outcome IN ('1-0', '0-1') AND p.ply >= 2 * $skip_moves AND NOT p.is_capture
)
SELECT * EXCLUDE (draw), CASE WHEN winner = 'white' THEN 1 ELSE 0 END AS target
FROM candidates
WHERE draw <= $per_game;
