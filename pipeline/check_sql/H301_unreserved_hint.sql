-- severity: warning
-- marmot: 5.2 File manipulation
-- title: a hint key the MPI standard does not reserve (not portable)
-- rule: MPI 3.1 13.2.8: only the reserved file hint keys are portable; others are implementation specific
-- columns: calls.func, calls.hints, calls.coll_seq
-- needs: hints
-- One finding per (key, call): a collective call (open, set_info, set_view) is one call on all its
-- ranks (its coll_seq); a delete is a call of its own rank.
SELECT list(rank ORDER BY rank) AS ranks, list(callid ORDER BY rank) AS callids,
       list(func ORDER BY rank) AS funcs, any_value(file) AS file,
       'hint key ' || key || ' passed to ' || any_value(func) || ' is not reserved by the MPI standard'
           AS detail
FROM hint_items
WHERE key NOT IN (SELECT key FROM reserved_hints)
GROUP BY key, coll_seq, CASE WHEN coll_seq IS NULL THEN call_no END
ORDER BY min(t_start), key
