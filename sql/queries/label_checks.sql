-- Integrity of one engine setting's labels of the given shards ($shard_list, by
-- position_key % $shards): rows, positions labelled more than once,
-- and rows whose scores break the label contract (in all, and those written by run $run_id).
-- $cp_bound and $mate_bound are pipeline/labels/engine.py's CP_BOUND and MATE_BOUND.
WITH setting AS (
    SELECT *, NOT (
        (cp IS NULL) <> (mate IS NULL)
        AND (cp IS NULL OR (abs(cp) < $cp_bound AND score = cp))
        AND (mate IS NULL OR (abs(mate) <= $mate_bound AND abs(score) BETWEEN 31000 AND 32000
                              AND (mate = 0 OR sign(mate) = sign(score))))
        AND depth >= 0
        AND (limit_kind <> 'depth' OR depth <= limit_value OR mate IS NOT NULL)
    ) AS broken
    FROM labels
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
      AND in_shards(position_key, $shard_list, $shards)
)
SELECT
    count(*) AS rows,
    count(*) - count(DISTINCT (position_key, planes, side_to_move, castling, ep_square)) AS duplicates,
    count(*) FILTER (WHERE broken) AS out_of_range,
    count(*) FILTER (WHERE broken AND run_id = $run_id) AS out_of_range_this_run,
    min(score) AS min_score,
    max(score) AS max_score
FROM setting;
