-- severity: warning
-- marmot: 5.2 File manipulation
-- title: a group from MPI_File_get_group never freed
-- rule: MPI 3.1 13.2.7: MPI_FILE_GET_GROUP returns a duplicate of the file's group, which the user is responsible for freeing (before MPI_FINALIZE)
-- columns: calls.func, calls.rank, calls.fid, calls.file, calls.error, calls.comm_id (open), mpi_calls.func, mpi_calls.rank, mpi_calls.comm_id
-- needs: opens, groups
-- A group is known by its ranks (comm_id: the hash of its MPI_COMM_WORLD ranks; a file's group is its
-- open's communicator's): each rank's successful get_group calls on the files of one communicator
-- against its MPI_Group_free of groups of the same ranks that get_group handed out (the tracers log
-- only those). One finding per communicator, naming the get_group calls of the ranks short of frees.
-- (Through the MPI library, a group is known by its handle: MPICH hands out one handle for one group
-- however it was made, so the free of the same group made by MPI_Comm_group also counts.)
WITH got AS (
    SELECT g.rank, o.comm_id, list(DISTINCT g.file) AS files, list(g.callid ORDER BY g.t_start) AS callids,
           count(*) AS n, min(g.t_start) AS t_start
    FROM calls g JOIN calls o ON o.func = 'MPI_File_open' AND o.rank = g.rank AND o.fid = g.fid
    WHERE g.func = 'MPI_File_get_group' AND g.error IS NULL
    GROUP BY g.rank, o.comm_id
), freed AS (
    SELECT rank, comm_id, count(*) AS n FROM mpi_calls WHERE func = 'MPI_Group_free' GROUP BY rank, comm_id
), short AS (
    SELECT got.*, got.n - coalesce(freed.n, 0) AS unfreed
    FROM got LEFT JOIN freed ON freed.rank = got.rank AND freed.comm_id = got.comm_id
    WHERE got.n > coalesce(freed.n, 0)
)
SELECT list(rank ORDER BY rank) AS ranks, flatten(list(callids ORDER BY rank)) AS callids,
       flatten(list(list_transform(callids, lambda c: 'MPI_File_get_group') ORDER BY rank)) AS funcs,
       list_sort(list_distinct(flatten(list(files))))[1] AS file,
       sum(unfreed) || ' of the ' || sum(n) || ' groups MPI_File_get_group returned never freed with '
           || 'MPI_Group_free' AS detail
FROM short
GROUP BY comm_id
ORDER BY min(t_start)
