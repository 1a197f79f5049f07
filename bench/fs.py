"""Bandwidth of the simulated file system against raw socket + pwrite and plain MPI-IO.

Every figure is write and read bandwidth (MiB/s) of one pattern, mpi-io-test's: in
iteration i rank r accesses the block at ``(i * ranks + r) * block``, all ranks start
together after a barrier and the slowest rank's time counts.  No sync is timed (a
write is done when the servers acknowledge it, as in PVFS2 without TroveSyncData).

* ``sim``: ``callid run`` (real servers, real ranks under mpiexec, CallIDs and both
  logs on), for 2 and 4 I/O servers, 2 and 4 ranks, 64 KiB and 256 KiB flow buffers;
* ``raw``: plain Python processes on loopback, one per rank and one per server,
  sending the same bytes (simple_stripe shares) in chunks of the flow buffer size
  through a socket into ``os.pwrite`` (reads: ``os.preadv`` back through the socket),
  with no protocol and no logging: the practical limit of this design;
* ``mpiio``: the same pattern through plain MPI-IO (the mpich wheel's ROMIO) on a
  local file, for context;
* ``floor``: the 2-server, 2-rank, 256 KiB case through the same exchanges (requests
  with a traced request's hints, acknowledgements, framed flow buffers, completions) with
  server_sim's protocol and BMI code, between minimal Python servers and clients that do
  nothing else (no events, logs, request handlers or MPI): what this protocol costs in
  Python before anything of ours is added, beside the raw baseline;
* ``events off``: the 2-server, 2-rank, 256 KiB case with the servers' event logging
  switched off (a Config field kept for this measurement), interleaved with it on.

Runs are repeated and interleaved (sim, raw, sim, raw ...); figures are medians.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MiB = 1 << 20
KiB = 1 << 10
STRIP = 64 * KiB
_RAW_HEADER = struct.Struct("<QQQ")  # op, offset, length
_RAW_WRITE, _RAW_READ, _RAW_ACK = 1, 2, 3


# --------------------------------------------------------------------------- the ranks' workload


def _pattern(rank: int, size: int) -> bytearray:
    unit = bytes((rank * 7 + i) % 256 for i in range(256))
    return bytearray((unit * (size // 256 + 1))[:size])


def rank_workload(argv: list[str]) -> int:
    """The MPI program (under ``callid run`` or plain ``mpiexec``): timed writes, then reads."""
    from mpi4py import MPI

    parser = argparse.ArgumentParser()
    parser.add_argument("-f", "--file", required=True)
    parser.add_argument("-b", "--block", type=int, default=MiB)
    parser.add_argument("-i", "--iterations", type=int, default=16)
    args = parser.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank, nranks = comm.Get_rank(), comm.Get_size()
    block = _pattern(rank, args.block)
    offsets = [(i * nranks + rank) * args.block for i in range(args.iterations)]
    fh = MPI.File.Open(comm, args.file, MPI.MODE_RDWR | MPI.MODE_CREATE)
    comm.Barrier()
    t0 = MPI.Wtime()
    for off in offsets:
        fh.Write_at(off, block)
    write_s = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    buf = bytearray(args.block)
    ok = True
    comm.Barrier()
    t0 = MPI.Wtime()
    for off in offsets:
        fh.Read_at(off, buf)
    read_s = comm.allreduce(MPI.Wtime() - t0, op=MPI.MAX)
    ok = comm.allreduce(buf == block, op=MPI.LAND)
    fh.Close()
    if rank == 0:
        print(json.dumps({"write_s": write_s, "read_s": read_s, "check": ok}), flush=True)
    return 0


def _bandwidths(figures: dict, total: int) -> tuple[float, float]:
    if not figures.get("check", True):
        raise RuntimeError("data read back differs from the data written")
    return total / MiB / figures["write_s"], total / MiB / figures["read_s"]


def _last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


# --------------------------------------------------------------------------- the simulated file system


def sim(servers: int, ranks: int, flow_buffer: int, block: int, iterations: int, directory: Path,
        server_events: bool = True) -> tuple[float, float]:
    """``callid run`` of the workload; (write, read) MiB/s."""
    from callid.run import RunOptions, run

    target = [str(Path(__file__).resolve()), "-f", "/pvfs2/fs-bench", "-b", str(block),
              "-i", str(iterations)]
    shutil.rmtree(directory, ignore_errors=True)  # every run starts from an empty file system
    os.sync()  # ... and no write-back of an earlier run's dirty pages
    result = run(RunOptions(target=target, np=ranks, servers=servers, strip_size=STRIP,
                            flow_buffer=flow_buffer, out=str(directory), capture=True,
                            server_events=server_events, timeout=600))
    shutil.rmtree(directory, ignore_errors=True)
    return _bandwidths(_last_json(result.stdout), block * iterations * ranks)


def mpiio(ranks: int, block: int, iterations: int, directory: Path) -> tuple[float, float]:
    """The workload through plain MPI-IO (ROMIO) on a local file; (write, read) MiB/s."""
    from callid.run import find_mpiexec

    path = directory / "mpiio.dat"
    cmd = [find_mpiexec(), "-n", str(ranks), sys.executable, str(Path(__file__).resolve()),
           "-f", str(path), "-b", str(block), "-i", str(iterations)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    path.unlink(missing_ok=True)
    return _bandwidths(_last_json(out), block * iterations * ranks)


# --------------------------------------------------------------------------- raw socket + pwrite


def _recv_into(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < view.nbytes:
        k = sock.recv_into(view[got:])
        if not k:
            raise ConnectionError("peer closed")
        got += k


def _raw_connection(sock: socket.socket, fd: int, chunk: int) -> None:
    buf = memoryview(bytearray(max(chunk, _RAW_HEADER.size)))
    header = memoryview(bytearray(_RAW_HEADER.size))
    while True:
        try:
            _recv_into(sock, header)
        except ConnectionError:
            return
        op, offset, length = _RAW_HEADER.unpack(header)
        if op == _RAW_WRITE:
            _recv_into(sock, buf[:length])
            os.pwrite(fd, buf[:length], offset)
        elif op == _RAW_READ:
            end = offset + length
            while offset < end:
                n = min(chunk, end - offset)
                os.preadv(fd, [buf[:n]], offset)
                sock.sendall(buf[:n])
                offset += n
        else:
            sock.sendall(header)


def _server_process(path: str, chunk: int, clients: int, port_out, connection=_raw_connection) -> None:
    """A baseline's server: one thread per client, each running ``connection`` on one file."""
    listener = socket.create_server(("127.0.0.1", 0))
    port_out.send(listener.getsockname()[1])
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    threads = []
    for _ in range(clients):
        sock, _peer = listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threads.append(threading.Thread(target=connection, args=(sock, fd, chunk)))
        threads[-1].start()
    for t in threads:
        t.join()
    os.close(fd)


def _raw_client(rank: int, ranks: int, ports: list[int], block: int, iterations: int, chunk: int,
                barrier) -> None:
    from server_sim.distribution import SimpleStripe

    dist = SimpleStripe(STRIP, len(ports))
    socks = [socket.create_connection(("127.0.0.1", p)) for p in ports]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = memoryview(_pattern(rank, block))
    back = memoryview(bytearray(block))
    shares = [[dist.share(n, (i * ranks + rank) * block, block) for n in range(len(ports))]
              for i in range(iterations)]
    barrier.wait()
    for per_server in shares:  # write: every server's share in chunks, streamed
        pos = 0
        for sock, (start, k) in zip(socks, per_server):
            for o in range(0, k, chunk):
                n = min(chunk, k - o)
                sock.sendmsg([_RAW_HEADER.pack(_RAW_WRITE, start + o, n), data[pos + o:pos + o + n]])
            pos += k
    for sock in socks:  # the last write is on disk once the server answers
        sock.sendall(_RAW_HEADER.pack(_RAW_ACK, 0, 0))
    for sock in socks:
        _recv_into(sock, memoryview(bytearray(_RAW_HEADER.size)))
    barrier.wait()
    barrier.wait()
    for per_server in shares:  # read: ask every server for its share, receive them
        for sock, (start, k) in zip(socks, per_server):
            sock.sendall(_RAW_HEADER.pack(_RAW_READ, start, k))
        pos = 0
        for sock, (_start, k) in zip(socks, per_server):
            _recv_into(sock, back[pos:pos + k])
            pos += k
    barrier.wait()
    for sock in socks:
        sock.close()


def raw(servers: int, ranks: int, chunk: int, block: int, iterations: int,
        directory: Path) -> tuple[float, float]:
    """Raw socket + pwrite processes moving the workload's bytes; (write, read) MiB/s."""
    return _processes(_raw_connection, _raw_client, servers, ranks, chunk, block, iterations, directory)


def _processes(connection, client, servers: int, ranks: int, chunk: int, block: int, iterations: int,
               directory: Path) -> tuple[float, float]:
    """Forked servers (``connection`` serves each client) and clients; (write, read) MiB/s."""
    os.sync()  # no write-back of an earlier run's dirty pages during this one
    ctx = mp.get_context("fork")
    pipes = [ctx.Pipe(duplex=False) for _ in range(servers)]
    procs = [ctx.Process(target=_server_process, args=(str(directory / f"raw-{n}.bstream"), chunk, ranks, w,
                                                   connection))
             for n, (_r, w) in enumerate(pipes)]
    for p in procs:
        p.start()
    ports = [r.recv() for r, _w in pipes]
    barrier = ctx.Barrier(ranks + 1, timeout=120)  # (a failed process breaks it instead of hanging)
    clients = [ctx.Process(target=client, args=(r, ranks, ports, block, iterations, chunk, barrier))
               for r in range(ranks)]
    for p in clients:
        p.start()
    barrier.wait()
    t0 = time.perf_counter()
    barrier.wait()
    write_s = time.perf_counter() - t0
    barrier.wait()
    t0 = time.perf_counter()
    barrier.wait()
    read_s = time.perf_counter() - t0
    for p in clients + procs:
        p.join(60)
        if p.is_alive():
            p.kill()
            p.join()
    for n in range(servers):
        (directory / f"raw-{n}.bstream").unlink(missing_ok=True)
    if any(p.exitcode for p in clients + procs):
        raise RuntimeError(f"a baseline process failed (exit codes {[p.exitcode for p in clients + procs]})")
    return _bandwidths({"write_s": write_s, "read_s": read_s}, block * iterations * ranks)


# --------------------------------------------------------------------------- the protocol floor


def _floor_connection(sock: socket.socket, fd: int, chunk: int) -> None:
    """A minimal I/O server: each request decoded, acknowledged and its flow buffers moved
    between BMI messages and the file as the real server does, and nothing else."""
    from server_sim import bmi
    from server_sim import protocol as P
    from server_sim.distribution import SimpleStripe, flow_buffers

    per_batch = max(1, bmi.FLOW_BATCH // chunk)
    scratch = memoryview(bytearray(per_batch * chunk))
    while (header := bmi.recv_header(sock)) is not None:
        tag = header[1]
        req = P.decode(bmi.recv_payload(sock, header[2]))
        dist = SimpleStripe(req.strip_size, req.dfile_count)
        segments = tuple(dist.share(req.dfile_nr, off, n) for off, n in req.regions)
        out = bmi.frame(bmi.MODE_EXPECTED, tag, P.encode(req.reply(buffer_size=chunk)))
        writing = req.io_type == P.IoType.WRITE
        if writing:
            bmi.send_buffers(sock, out)
            out = []
        buffers = flow_buffers(segments, chunk)
        batch: list[tuple[tuple, memoryview]] = []  # (a batch's buffers: received at once, or sent at once)
        pos = 0
        for i, (pieces, nbytes) in enumerate(buffers, 1):
            batch.append((pieces, scratch[pos:pos + nbytes]))
            pos += nbytes
            if i % per_batch and i < len(buffers):
                continue
            if writing:
                bmi.recv_messages_into(sock, tag, [[view] for _, view in batch])
            for pieces, view in batch:
                rest = view
                for off, k in pieces:
                    (os.pwritev if writing else os.preadv)(fd, [rest[:k]], off)
                    rest = rest[k:]
                if not writing:
                    out += bmi.frame(bmi.MODE_EXPECTED, tag, view)
            if not writing:
                bmi.send_buffers(sock, out)
            out, batch, pos = [], [], 0
        if writing:
            done = sum(n for _, n in segments)
            bmi.send(sock, bmi.MODE_EXPECTED, tag, P.encode(req.completion(bytes_written=done)))


def _floor_client(rank: int, ranks: int, ports: list[int], block: int, iterations: int, chunk: int,
                  barrier) -> None:
    """A minimal client of the same protocol: one request per server and access, carrying the
    hints of a traced request; reads land in place and the last block read is checked."""
    from server_sim import bmi
    from server_sim import protocol as P
    from server_sim.distribution import SimpleStripe, flow_buffers

    dist = SimpleStripe(STRIP, len(ports))
    socks = [bmi.connect("127.0.0.1", p) for p in ports]
    data, back = memoryview(_pattern(rank, block)), memoryview(bytearray(block))
    per_batch = max(1, bmi.FLOW_BATCH // chunk)
    ack_size = len(P.encode(P.IoResponse()))

    def access(io_type: P.IoType, tag: int, off: int) -> None:
        for n, sock in enumerate(socks):
            msg = P.IoRequest(handle=1, io_type=io_type, strip_size=STRIP, dfile_nr=n,
                              dfile_count=len(socks), regions=[(off, block)])
            msg.hints = {"rank": rank, "request_id": tag, "callid": [tag]}
            bmi.send(sock, bmi.MODE_UNEXPECTED, tag, P.encode(msg))
        shares = dist.stream_pieces(off, block)
        for n, pieces, _ in shares:
            if io_type == P.IoType.READ:
                ack = memoryview(bytearray(ack_size))
                views = ([back[o:o + k] for o, k in buf] for buf, _ in flow_buffers(pieces, chunk))
                messages = [[ack], *views]
                P.decode(ack[:bmi.recv_messages_into(socks[n], tag, messages, short_first=True)])
                continue
            P.decode(bmi.recv_expected(socks[n], tag, ack_size))
            buffers = flow_buffers(pieces, chunk)
            out: list[memoryview] = []
            for i, (buf, _) in enumerate(buffers, 1):
                out += bmi.frame(bmi.MODE_EXPECTED, tag, *[data[o:o + k] for o, k in buf])
                if i % per_batch == 0 or i == len(buffers):
                    bmi.send_buffers(socks[n], out)
                    out = []
        if io_type == P.IoType.WRITE:
            for n, _, _ in shares:
                P.decode(bmi.recv_expected(socks[n], tag))

    for io_type in (P.IoType.WRITE, P.IoType.READ):
        barrier.wait()
        for i in range(iterations):
            access(io_type, i + 1, (i * ranks + rank) * block)
        barrier.wait()
    if back != data:
        sys.exit("the protocol floor read back other bytes than it wrote")  # (exit code 1, no traceback)
    for sock in socks:
        sock.close()


def floor(servers: int, ranks: int, chunk: int, block: int, iterations: int,
          directory: Path) -> tuple[float, float]:
    """The same exchanges through server_sim's protocol and BMI code between minimal Python
    servers and clients (no events, logs, request handlers or MPI); (write, read) MiB/s."""
    return _processes(_floor_connection, _floor_client, servers, ranks, chunk, block, iterations, directory)


# --------------------------------------------------------------------------- the benchmark


def _median(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def _positive(parse=int):
    """An argparse type: ``parse`` the text, and refuse what is not above zero."""
    def check(text: str) -> int:
        value = parse(text)
        if value <= 0:
            raise ValueError(f"{text!r} is not above zero")
        return value
    check.__name__ = "positive number"  # (named in argparse's error message)
    return check


def main(argv: list[str]) -> int:
    from callid.run import RunError
    from callid_core.units import parse_size

    parser = argparse.ArgumentParser(prog="python -m bench fs", description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=_positive(parse_size), default=256 * MiB,
                        help="bytes written (and read) per run, e.g. 256MiB")
    parser.add_argument("--block", type=_positive(parse_size), default=MiB,
                        help="bytes per access (default 1MiB)")
    parser.add_argument("--repeat", type=_positive(), default=5, help="runs of each case (medians are shown)")
    parser.add_argument("--events-repeat", type=_positive(), default=5,
                        help="runs with server events on and off")
    parser.add_argument("--quick", action="store_true", help="one case (2, 2, 256 KiB), fewer runs")
    args = parser.parse_args(argv)
    try:
        return _measure(args)
    except (RuntimeError, RunError, subprocess.CalledProcessError) as exc:
        print(f"python -m bench fs: error: {exc}", file=sys.stderr)
        return 1


def _measure(args: argparse.Namespace) -> int:
    if args.quick:
        args.bytes, args.repeat, args.events_repeat = 64 * MiB, 1, 3
    cases = [(s, r, fb) for s in (2, 4) for r in (2, 4) for fb in (64 * KiB, 256 * KiB)]
    if args.quick:
        cases = [(2, 2, 256 * KiB)]
    figures: dict = {"benchmark": "fs", "bytes": args.bytes, "block": args.block, "strip": STRIP, "cases": []}
    print(f"{'servers':>7} {'ranks':>5} {'buffer':>7} | {'write MiB/s: sim':>16} {'raw':>6} {'sim/raw':>7} "
          f"{'mpiio':>6} | {'read MiB/s: sim':>15} {'raw':>6} {'sim/raw':>7} {'mpiio':>6}", flush=True)
    with tempfile.TemporaryDirectory(prefix="callid-bench-fs-") as tmp:
        d = Path(tmp)
        mpi: dict[int, tuple[float, float]] = {}
        for ranks in sorted({r for _, r, _ in cases}):
            iters = max(1, args.bytes // (args.block * ranks))
            mpi[ranks] = _median([mpiio(ranks, args.block, iters, d) for _ in range(args.repeat)])
        for servers, ranks, fb in cases:
            iters = max(1, args.bytes // (args.block * ranks))
            ours, theirs = [], []
            for _ in range(args.repeat):
                ours.append(sim(servers, ranks, fb, args.block, iters, d / "run"))
                theirs.append(raw(servers, ranks, fb, args.block, iters, d))
            (sw, sr), (rw, rr), (mw, mr) = _median(ours), _median(theirs), mpi[ranks]
            row = {"servers": servers, "ranks": ranks, "flow_buffer": fb, "sim_write": round(sw, 1),
                   "raw_write": round(rw, 1), "write_ratio": round(sw / rw, 3), "mpiio_write": round(mw, 1),
                   "sim_read": round(sr, 1), "raw_read": round(rr, 1), "read_ratio": round(sr / rr, 3),
                   "mpiio_read": round(mr, 1)}
            figures["cases"].append(row)
            print(f"{servers:>7} {ranks:>5} {fb // KiB:>4}KiB | {sw:>16.1f} {rw:>6.1f} {sw / rw:>7.3f} "
                  f"{mw:>6.1f} | {sr:>15.1f} {rr:>6.1f} {sr / rr:>7.3f} {mr:>6.1f}", flush=True)
        iters = max(1, args.bytes // (args.block * 2))
        on, off = [], []
        for i in range(args.events_repeat):
            for events in (i % 2 == 0, i % 2 == 1):  # alternate which runs first
                (on if events else off).append(sim(2, 2, 256 * KiB, args.block, iters, d / "run",
                                                   server_events=events))
        (onw, onr), (offw, offr) = _median(on), _median(off)
        figures["server_events"] = {"on_write": round(onw, 1), "off_write": round(offw, 1),
                                    "write_cost": round(1 - onw / offw, 3), "on_read": round(onr, 1),
                                    "off_read": round(offr, 1), "read_cost": round(1 - onr / offr, 3)}
        print(f"server event logging (2 servers, 2 ranks, 256 KiB, {args.events_repeat} runs each): "
              f"write {onw:.1f} vs {offw:.1f} MiB/s off ({1 - onw / offw:+.1%} cost), "
              f"read {onr:.1f} vs {offr:.1f} MiB/s off ({1 - onr / offr:+.1%} cost)")
        ours, theirs = [], []
        for _ in range(args.repeat):
            ours.append(floor(2, 2, 256 * KiB, args.block, iters, d))
            theirs.append(raw(2, 2, 256 * KiB, args.block, iters, d))
        (fw, fr), (rw, rr) = _median(ours), _median(theirs)
        target = next(row for row in figures["cases"] if (row["servers"], row["ranks"]) == (2, 2)
                      and row["flow_buffer"] == 256 * KiB)
        sw, sr = target["sim_write"], target["sim_read"]
        figures["floor"] = {"write": round(fw, 1), "raw_write": round(rw, 1),
                            "write_ratio": round(fw / rw, 3), "read": round(fr, 1), "raw_read": round(rr, 1),
                            "read_ratio": round(fr / rr, 3), "sim_write_of_floor": round(sw / fw, 3),
                            "sim_read_of_floor": round(sr / fr, 3)}
        print(f"protocol floor (the same exchanges, minimal Python servers and clients; 2 servers, 2 ranks, "
              f"256 KiB, {args.repeat} runs): write {fw:.1f} vs {rw:.1f} MiB/s raw ({fw / rw:.3f}), "
              f"read {fr:.1f} vs {rr:.1f} ({fr / rr:.3f}); sim / floor: write {sw / fw:.3f}, "
              f"read {sr / fr:.3f}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(rank_workload(sys.argv[1:]))
