-- Sabatelli's 15 classes: a draw class for -1.5..+1.5 pawns, then one class per further pawn,
-- seven a side, the last open-ended. target 0 = below -7.5 ... 6 = [-2.5, -1.5), 7 = draw,
-- 8 = (1.5, 2.5] ... 14 = above +7.5 (macro sabatelli_class15 has the edges in centipawns).
SELECT *, sabatelli_class15(score) AS target
FROM sabatelli_positions($min_elo, $label_kind, $label_value, $label_engine, $pov);
