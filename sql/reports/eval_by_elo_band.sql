-- How evaluations spread by strength: position rows per 1-pawn bucket of the best label's
-- score (White's view, clipped to +/-10 pawns; mates at the ends), by the game's average
-- rating band (200 wide, named by its lower edge). One column per band.
PIVOT (
    SELECT lpad((((g.white_elo + g.black_elo) // 400) * 200)::VARCHAR, 4, '0') AS elo_band,
           least(10, greatest(-10, round(lp.score / 100.0)))::INTEGER AS pawns
    FROM labelled_positions lp
    JOIN games g USING (game_id)
    WHERE lp.score IS NOT NULL AND g.white_elo IS NOT NULL AND g.black_elo IS NOT NULL
) ON elo_band USING count(*) GROUP BY pawns ORDER BY pawns;
