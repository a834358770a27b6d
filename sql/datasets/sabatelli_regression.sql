-- Sabatelli's regression target: the score mapped linearly onto [0, 1] after clipping to
-- +/- clip_cp (default 15 pawns); a mate counts as beyond the clip (0 or 1), so outliers and
-- mates sit at the ends. win_prob is the alternative target: 1 / (1 + 10^(-score / wp_scale)),
-- 0 or 1 for mates. `target` is the one `target_kind` names ('linear' or 'win_prob'); any
-- other target_kind raises (the one-row `known` guard runs even when no row does).
WITH s AS (
    SELECT *,
           (least(greatest(score, -$clip_cp), $clip_cp) + $clip_cp) / (2.0 * $clip_cp) AS linear,
           CASE WHEN mate_white IS NOT NULL THEN CASE WHEN score > 0 THEN 1.0 ELSE 0.0 END
                ELSE 1.0 / (1.0 + pow(10.0, -score / $wp_scale)) END AS win_prob
    FROM sabatelli_positions($min_elo, $label_kind, $label_value, $label_engine, $pov)
), known AS (
    SELECT CASE WHEN $target_kind IN ('linear', 'win_prob') THEN true
                ELSE error('target_kind must be one of linear, win_prob; got ''' || coalesce($target_kind, 'NULL') || '''')
           END AS target_kind_ok
)
SELECT s.*, CASE WHEN score IS NULL THEN NULL
                 WHEN $target_kind = 'win_prob' THEN win_prob ELSE linear END AS target
FROM s CROSS JOIN known
WHERE known.target_kind_ok;
