"""``callid replay``: the I/O of an earlier run, replayed with CallIDs on the simulated file system.

``accesses`` declares what is replayed (one row per MPI-IO data access); ``darshan`` reads it from
a Darshan DXT log; ``plan`` orders it into CallIDs and collective calls; ``driver`` runs in each
replayer process under mpiexec; ``job`` starts the servers and the replayers.
"""
