"""Write flows in batches: the client sends up to ``bmi.FLOW_BATCH`` bytes of buffers in one
system call and the server receives them in one scatter receive, then writes each buffer with
its own Trove operation and event; a disk failure midway still drains every buffer."""

from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path

import pytest

from callid.mpiio.call import CallContext
from callid.mpiio.sysint import FsError, SysInt
from server_sim import bmi
from server_sim import protocol as P
from tests.server.test_server import EventReader, predicted_trove_ops

_CALLID = (9 << 41) | 1


def _call(n: int) -> CallContext:
    return CallContext((_CALLID + n,), "MPI_File_write_at")


def test_a_write_of_several_batches_writes_each_buffer_with_one_trove_op(fs):
    """Three batches on one datafile (32 KiB buffers: 32 a batch), the last partial."""
    client, reader = SysInt(fs.config, 9, lambda *a: None), EventReader(fs.config.trace_dir)
    f = client.create("/pvfs2/write-batches", _call(0), dfile_count=1, strip_size=65536)
    length = 2 * bmi.FLOW_BATCH + 5 * fs.config.flow_buffer + 1234
    data = random.Random(3).randbytes(length)
    assert client.io(f, P.IoType.WRITE, [(999, length)], memoryview(data), _call(1)) == length
    back = bytearray(length)
    assert client.io(f, P.IoType.READ, [(999, length)], memoryview(back), _call(2)) == length
    assert back == data
    expect = predicted_trove_ops(f.dist, [f.dfiles[0][0]], 999, length, fs.config.flow_buffer,
                                 min(fs.config.small_io, P.SMALL_IO_MAX_DATA), "trove_write")
    assert len(expect) == 2 * bmi.FLOW_BATCH // fs.config.flow_buffer + 6
    assert reader.trove_ops(_CALLID + 1) == expect
    client.close()


def _file_size_limit(directory: Path) -> int | None:
    """The largest file offset ext4 (4 KiB blocks) takes, if ``directory``'s file system has it."""
    limit = (1 << 44) - 4096
    probe = directory / "limit.probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"x", limit - 1)
        os.pwrite(fd, b"x", limit)
    except OSError:
        return limit
    finally:
        os.close(fd)
        probe.unlink()
    return None


def test_a_disk_failure_midway_through_a_write_drains_every_batch_and_answers_efbig(fs, tmp_path):
    """Buffers past the file system's largest file fail (EFBIG) from the third on: the server still
    receives all 40 buffers (two batches), answers EFBIG, logs the two writes that were done, and the
    connection goes on serving."""
    limit = _file_size_limit(tmp_path)
    if limit is None:
        pytest.skip("this file system takes files past 16 TiB: no disk failure to provoke")
    client, reader = SysInt(fs.config, 9, lambda *a: None), EventReader(fs.config.trace_dir)
    f = client.create("/pvfs2/too-far", _call(10), dfile_count=1, strip_size=65536)
    buffer = fs.config.flow_buffer
    start = limit - 2 * buffer
    data = random.Random(4).randbytes(40 * buffer)
    with pytest.raises(FsError) as failed:
        client.io(f, P.IoType.WRITE, [(start, len(data))], memoryview(data), _call(11))
    assert failed.value.status == P.Status.EFBIG
    server = f.dfiles[0][0]
    assert reader.trove_ops(_CALLID + 11) == [(server, "trove_write", start, buffer),
                                              (server, "trove_write", start + buffer, buffer)]
    back = bytearray(2 * buffer)  # (the same connection: still in step)
    assert client.io(f, P.IoType.READ, [(start, len(back))], memoryview(back), _call(12)) == len(back)
    assert back == data[:len(back)]
    client.remove("/pvfs2/too-far", _call(13))
    client.close()


def test_a_client_refuses_a_write_flow_in_other_buffers_than_its_configuration_says(fs):
    """The server acknowledges a write with its flow buffer size; a client configured otherwise would
    cut the stream differently, so it fails the write (EIO) instead of sending its buffers."""
    other = dataclasses.replace(fs.config, flow_buffer=2 * fs.config.flow_buffer)
    client = SysInt(other, 9, lambda *a: None)
    f = client.create("/pvfs2/other-buffers", _call(20), dfile_count=1, strip_size=65536)
    data = bytes(4 * other.flow_buffer)
    with pytest.raises(FsError, match="flow buffers") as failed:
        client.io(f, P.IoType.WRITE, [(0, len(data))], memoryview(data), _call(21))
    assert failed.value.status == P.Status.EIO
    client.close()
