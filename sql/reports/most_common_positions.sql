-- The positions seen in most games, from ply 10 on.
SELECT position_key, count(DISTINCT game_id) AS games, min(ply) AS first_ply
FROM positions
WHERE ply >= 10
GROUP BY position_key
ORDER BY games DESC
LIMIT 20;
