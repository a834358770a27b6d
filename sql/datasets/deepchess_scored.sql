-- DeepChess's positions with a score to learn from (ours, issue 39): every position of a decisive
-- game after move `skip_moves` not reached by a capture (deepchess_positions, as deepchess.sql
-- takes them), each with Stockfish's score of the label setting (White's view: cp, or
-- +/-(32000 - plies to mate); NULL where the store has no such label, e.g. a position in check has
-- no static eval). Train keeps every such position, val and test only deepchess's `per_game` of
-- each game (`deepchess_row`, the same hash order: DatasetSpec.held_out), so its held-out pairs are
-- deepchess's, row for row. target 1 = White won, as deepchess's; a comparator trained on it may
-- order its train pairs by score instead (training.models.ModelSpec.pair_order).
SELECT d.* EXCLUDE (draw), l.score, CASE WHEN d.winner = 'white' THEN 1 ELSE 0 END AS target,
       d.draw <= $per_game AS deepchess_row
FROM deepchess_positions($sample_seed, $skip_moves) d
LEFT JOIN setting_labels($label_kind, $label_value, $label_engine) l
    ON l.position_key = d.position_key AND l.planes = d.planes AND l.side_to_move = d.side_to_move
   AND l.castling = d.castling AND l.ep_square IS NOT DISTINCT FROM d.ep_square;
