"""Collective write of interleaved blocks, then a collective read-back check.

    callid run -n 4 examples/collective_write.py --block 256KiB --blocks 4 --cb-nodes 2

Rank r owns blocks r, r + n, r + 2n, ... of the file (a vector filetype view) and
writes them all with one ``MPI_File_write_all``; ROMIO-style collective
buffering gathers them on ``--cb-nodes`` aggregators (``--cb-write disable``
makes every rank write its own blocks).  Everyone then reads the whole file and
checks every block.
"""

from __future__ import annotations

import argparse
import sys

from mpi4py import MPI

from callid_core.units import parse_size


def block_bytes(rank: int, index: int, size: int) -> bytes:
    unit = bytes((rank * 37 + index * 11 + i) % 256 for i in range(256))
    return (unit * (size // 256 + 1))[:size]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--file", default="/pvfs2/collective", help="file to write")
    parser.add_argument("--block", type=parse_size, default=256 * 1024, help="block size (default 256KiB)")
    parser.add_argument("--blocks", type=int, default=4, help="blocks per rank (default 4)")
    parser.add_argument("--cb-nodes", type=int, help="aggregators (default: one per host)")
    parser.add_argument("--cb-buffer-size", type=parse_size, help="aggregator buffer (default 16MiB)")
    parser.add_argument("--cb-write", choices=["enable", "disable", "automatic"], default="enable")
    parser.add_argument("--cb-read", choices=["enable", "disable", "automatic"], default="automatic")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    info = MPI.Info.Create()
    info.Set("romio_cb_write", args.cb_write)
    info.Set("romio_cb_read", args.cb_read)
    if args.cb_nodes:
        info.Set("cb_nodes", str(args.cb_nodes))
    if args.cb_buffer_size:
        info.Set("cb_buffer_size", str(args.cb_buffer_size))
    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDWR | MPI.MODE_CREATE, info)
    blocks = MPI.BYTE.Create_vector(args.blocks, args.block, args.block * nranks).Commit()
    fh.Set_view(rank * args.block, MPI.BYTE, blocks)
    data = b"".join(block_bytes(rank, i, args.block) for i in range(args.blocks))
    status = MPI.Status()
    fh.Write_all(data, status)
    assert status.Get_count(MPI.BYTE) == len(data)
    fh.Sync()
    fh.Set_view(0, MPI.BYTE, MPI.BYTE)
    whole = bytearray(args.block * args.blocks * nranks)
    fh.Read_at_all(0, whole)
    fh.Close()
    blocks.Free()
    ok = all(whole[(i * nranks + r) * args.block:(i * nranks + r + 1) * args.block]
             == block_bytes(r, i, args.block) for i in range(args.blocks) for r in range(nranks))
    ok = comm.allreduce(ok, op=MPI.LAND)
    if rank == 0:
        verdict = "OK" if ok else "FAILED"
        print(f"collective write of {len(whole)} bytes by {nranks} ranks: read-back {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
