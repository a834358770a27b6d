-- Sabatelli's 3-class dataset: win (score > +1.5 pawns), draw (-1.5..+1.5), loss (< -1.5),
-- score from the side to move by default (see sabatelli_positions); mates are wins/losses.
-- target: 0 loss, 1 draw, 2 win.
SELECT *, sabatelli_class3(score) AS target
FROM sabatelli_positions($min_elo, $label_kind, $label_value, $label_engine, $pov);
