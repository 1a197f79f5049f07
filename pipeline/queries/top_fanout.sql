-- Which calls caused the most disk operations, on how many servers?
-- Run: callid sql merged.duckdb --query top_fanout
SELECT callid_hex, rank, func, size AS bytes_requested, disk_ops, servers, own_bytes, share_bytes
FROM fanout
ORDER BY disk_ops DESC, share_bytes DESC, callid
LIMIT 20;
