-- Sabatelli's regression target: the score mapped linearly onto [0, 1] after clipping to
-- +/- clip_cp (default 15 pawns); a mate counts as beyond the clip (0 or 1), so outliers and
-- mates sit at the ends. win_prob is the alternative target: 1 / (1 + 10^(-score / wp_scale)),
-- 0 or 1 for mates. `target` is the one `target_kind` names ('linear' or 'win_prob').
WITH s AS (
    SELECT *,
           (least(greatest(score, -$clip_cp), $clip_cp) + $clip_cp) / (2.0 * $clip_cp) AS linear,
           CASE WHEN mate_white IS NOT NULL THEN CASE WHEN score > 0 THEN 1.0 ELSE 0.0 END
                ELSE 1.0 / (1.0 + pow(10.0, -score / $wp_scale)) END AS win_prob
    FROM sabatelli_positions($min_elo, $label_kind, $label_value, $label_engine, $pov)
)
SELECT *, CASE WHEN score IS NULL THEN NULL
               WHEN $target_kind = 'win_prob' THEN win_prob ELSE linear END AS target
FROM s;
