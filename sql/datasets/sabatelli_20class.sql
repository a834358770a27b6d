-- Sabatelli's 20 classes: the 15-class edges with the draw region split into six half-pawn
-- classes. target 0..6 losses, 7..12 = [-1.5,-1.0), [-1.0,-0.5), [-0.5,0), [0,0.5),
-- [0.5,1.0), [1.0,1.5], 13..19 wins (macro sabatelli_class20).
SELECT *, sabatelli_class20(score) AS target
FROM sabatelli_positions($min_elo, $label_kind, $label_value, $label_engine, $pov);
