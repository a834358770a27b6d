-- Labelled positions of the given shards whose labels all fall short of a target setting:
-- made by another engine (an older version) or with a smaller limit of the target's kind.
-- Ordered oldest (newest label oldest) first, or most-used (most position rows) first.
-- $archives: only positions whose key occurs in those archive partitions; empty: all.
WITH scope AS (
    SELECT DISTINCT p.position_key FROM positions p
    SEMI JOIN games g ON g.game_id = p.game_id AND list_contains($archives, g.archive)
    WHERE len($archives) > 0 AND in_shards(p.position_key, $shard_list, $shards)
), labelled AS (
    SELECT position_key, planes, side_to_move, castling, ep_square, max(labelled_at) AS newest_label
    FROM labels
    WHERE in_shards(position_key, $shard_list, $shards)
    GROUP BY position_key, planes, side_to_move, castling, ep_square
), satisfied AS (
    SELECT position_key, planes, side_to_move, castling, ep_square FROM labels
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value >= $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
    UNION ALL
    SELECT position_key, planes, side_to_move, castling, ep_square FROM label_failures
    WHERE engine = $engine AND limit_kind = $limit_kind AND limit_value = $limit_value
      AND (limit_kind = 'static' OR coalesce(hash_cleared, $hash_cleared) = $hash_cleared)
)
SELECT u.position_key, u.planes, u.side_to_move, u.castling, u.ep_square, u.occurrences
FROM labelled l
JOIN shard_distinct_positions($shard_list, $shards) u
    ON u.position_key = l.position_key AND u.planes = l.planes AND u.side_to_move = l.side_to_move
   AND u.castling = l.castling AND u.ep_square IS NOT DISTINCT FROM l.ep_square
ANTI JOIN satisfied x
    ON x.position_key = u.position_key AND x.planes = u.planes AND x.side_to_move = u.side_to_move
   AND x.castling = u.castling AND x.ep_square IS NOT DISTINCT FROM u.ep_square
WHERE len($archives) = 0 OR u.position_key IN (SELECT position_key FROM scope)
ORDER BY CASE WHEN $order = 'most_used' THEN -u.occurrences ELSE epoch_us(l.newest_label) END,
         u.first_seen
LIMIT $max_positions;
