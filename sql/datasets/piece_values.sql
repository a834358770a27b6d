-- Positions with centipawn targets for the per-piece value network: White's point of view,
-- searched scores only (no mates), |cp| <= max_cp so that lost-and-won positions do not
-- dominate; games of players rated over min_elo (0: every game, rated or not) plus engine games.
-- target: cp / 100 (pawns); result_score: the game's result for White, 1 / 0.5 / 0 (NULL for an
-- unfinished game), the target of the network's second variant.
SELECT p.position_key, p.planes, p.side_to_move, p.castling, p.ep_square, p.halfmove_clock,
       p.fullmove_number, p.game_id, p.ply, g.source, g.white_elo, g.black_elo, g.outcome AS result,
       l.cp AS cp_white, material(p.planes) AS material,
       CASE g.outcome WHEN '1-0' THEN 1.0 WHEN '1/2-1/2' THEN 0.5 WHEN '0-1' THEN 0.0 END AS result_score,
       CASE WHEN l.position_key IS NULL THEN NULL ELSE l.cp / 100.0 END AS target
FROM positions p
JOIN games g USING (game_id)
LEFT JOIN setting_labels($label_kind, $label_value, $label_engine) l
    ON l.position_key = p.position_key AND l.planes = p.planes AND l.side_to_move = p.side_to_move
   AND l.castling = p.castling AND l.ep_square IS NOT DISTINCT FROM p.ep_square
WHERE ($min_elo <= 0 OR (g.white_elo > $min_elo AND g.black_elo > $min_elo) OR g.source IN ('ccrl', 'selfplay'))
  AND (l.position_key IS NULL OR (l.mate IS NULL AND abs(l.cp) <= $max_cp));
