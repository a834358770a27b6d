-- DeepChess: positions of decisive games only, `per_game` of them per game drawn at random
-- (a hash of sample_seed, game and ply orders them), never from the first `skip_moves` moves,
-- never a position reached by a capture (sql/views/label_macros.sql, deepchess_positions).
-- winner: 'white' / 'black'; target 1 = White won. Pairs (one from a White win, one from a Black
-- win) are drawn at training time.
SELECT * EXCLUDE (draw), CASE WHEN winner = 'white' THEN 1 ELSE 0 END AS target
FROM deepchess_positions($sample_seed, $skip_moves)
WHERE draw <= $per_game;
