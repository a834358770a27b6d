-- DeepChess's positions with a score to learn from (ours, issue 39): every position of a decisive
-- game after move `skip_moves` not reached by a capture, as deepchess.sql takes them, each with
-- Stockfish's score of the label setting (White's view: cp, or +/-(32000 - plies to mate); NULL
-- where the store has no such label, e.g. a position in check has no static eval). Train keeps
-- every such position, val and test only deepchess's `per_game` of each game (`deepchess_row`,
-- the same hash order: DatasetSpec.held_out), so its held-out pairs are deepchess's, row for row.
-- target 1 = White won, as deepchess's; a comparator trained on it may order its train pairs by
-- score instead (training.models.ModelSpec.pair_order).
WITH candidates AS (
    SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
           p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
           CASE g.outcome WHEN '1-0' THEN 'white' ELSE 'black' END AS winner,
           l.score,
           row_number() OVER (PARTITION BY p.game_id
                              ORDER BY md5($sample_seed::VARCHAR || ':' || p.game_id::VARCHAR || ':' || p.ply::VARCHAR)) AS draw
    FROM positions p
    JOIN games g USING (game_id)
    LEFT JOIN setting_labels($label_kind, $label_value, $label_engine) l
        ON l.position_key = p.position_key AND l.planes = p.planes AND l.side_to_move = p.side_to_move
       AND l.castling = p.castling AND l.ep_square IS NOT DISTINCT FROM p.ep_square
    WHERE g.outcome IN ('1-0', '0-1') AND p.ply >= 2 * $skip_moves AND NOT p.is_capture
)
SELECT * EXCLUDE (draw), CASE WHEN winner = 'white' THEN 1 ELSE 0 END AS target, draw <= $per_game AS deepchess_row
FROM candidates;
