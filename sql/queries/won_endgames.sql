-- Candidate won endgames for the conversion test: distinct positions whose best search label
-- gives the side to move more than $min_cp (mates count), with at most $max_material pawns of
-- material on the board (both sides, kings left out). A deterministic sample by $seed;
-- callers confirm each with a deeper search.
SELECT fen, score_stm, depth
FROM (
    SELECT fen, depth, position_key,
           CASE WHEN side_to_move = 'w' THEN score ELSE -score END AS score_stm
    FROM best_labels
    WHERE limit_kind <> 'static' AND total_material(planes) <= $max_material
)
WHERE score_stm > $min_cp
ORDER BY hash(position_key, $seed), fen
LIMIT $candidates;
