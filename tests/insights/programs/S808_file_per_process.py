"""S808: file per process, many small files: each rank creates ``FILES`` files of its own
(MPI_COMM_SELF), on one I/O server each (striping_factor=1, as small files are laid out), writes ``SIZE``
bytes to each, closes and deletes it."""

from mpi4py import MPI

FILES, SIZE = 10, 100

rank = MPI.COMM_WORLD.Get_rank()
for i in range(FILES):
    path = f"/pvfs2/fpp.{rank}.{i}"
    fh = MPI.File.Open(MPI.COMM_SELF, path, MPI.MODE_CREATE | MPI.MODE_WRONLY, MPI.Info.Create(
        items={"striping_factor": "1"}))
    fh.Write_at(0, b"y" * SIZE)
    fh.Close()
    MPI.File.Delete(path)
