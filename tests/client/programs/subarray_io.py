"""A 2D array of doubles written and read back collectively through a 2x2 subarray decomposition.

    callid run -n 4 --servers 4 tests/client/programs/subarray_io.py --n 1024

Rank r holds the block of rows ``(r // 2) * n/2 ...`` and columns ``(r % 2) * n/2 ...`` of the
``n`` x ``n`` row-major array (element value: its global index); it writes the block with one
``MPI_File_write_all`` through a subarray view, then reads it back with ``MPI_File_read_at_all``.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from mpi4py import MPI


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--file", default="/pvfs2/subarray", help="file to write")
    parser.add_argument("--n", type=int, default=1024, help="rows and columns of the array (even)")
    parser.add_argument("--cb-nodes", type=int, help="aggregators (default: one per host)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() != 4 or args.n % 2:
        print("needs 4 ranks and an even --n", file=sys.stderr)
        return 2
    n, half = args.n, args.n // 2
    r0, c0 = (rank // 2) * half, (rank % 2) * half
    block = (np.arange(r0, r0 + half)[:, None] * n + np.arange(c0, c0 + half)[None, :]).astype(np.float64)
    info = MPI.Info.Create()
    info.Set("romio_cb_write", "enable")
    info.Set("romio_cb_read", "enable")
    if args.cb_nodes:
        info.Set("cb_nodes", str(args.cb_nodes))
    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDWR | MPI.MODE_CREATE, info)
    view = MPI.DOUBLE.Create_subarray([n, n], [half, half], [r0, c0]).Commit()
    fh.Set_view(0, MPI.DOUBLE, view)
    fh.Write_all(block)
    back = np.zeros_like(block)
    fh.Read_at_all(0, back)
    fh.Close()
    view.Free()
    ok = comm.allreduce(bool((back == block).all()), op=MPI.LAND)
    if rank == 0:
        verdict = "OK" if ok else "FAILED"
        print(f"subarray write and read of {n * n * 8} bytes by 4 ranks: read-back {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
