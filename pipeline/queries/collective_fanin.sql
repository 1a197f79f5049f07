-- Which disk operations served several calls at once (collective buffering), and for which functions?
SELECT func,
       count(DISTINCT (server, event_id)) FILTER (WHERE n_callids > 1) AS shared_disk_ops,
       count(DISTINCT (server, event_id)) AS disk_ops,
       max(n_callids) AS max_calls_per_disk_op,
       round(avg(n_callids), 2) AS mean_calls_per_disk_op
FROM arrows
GROUP BY func
ORDER BY shared_disk_ops DESC, func;
