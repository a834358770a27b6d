-- Why games were rejected, per archive.
SELECT archive, reason_code, count(*) AS games, min(reason) AS example
FROM rejected_games
GROUP BY ALL
ORDER BY archive, games DESC;
