"""The Parquet part writer: columns built from buffers, concurrent appends, bad rows, no pandas; the
checksum of a log written whole."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from callid_core import checksum
from callid_core import schema as S
from callid_core.errors import InputError
from callid_core.partlog import PartLog, column, log_writer

SENTINEL = (1 << 64) - 1


@pytest.mark.parametrize(("values", "type_"), [
    ([1, None, 3], pa.int64()), ([SENTINEL, 0], pa.uint64()), ([-1, 7], pa.int32()),
    ([True, None, False], pa.bool_()), ([False, True], pa.bool_()),
    (["a", None, "héllo", ""], pa.string()), (["abc", "de"], pa.string()), ([None, None], pa.string()),
    ([[1, 2], [], [SENTINEL]], pa.list_(pa.uint64())), ([[1], None], pa.list_(pa.uint64())),
    ([None, None], pa.int64()), ([], pa.int64()),
])
def test_columns_from_buffers_equal_pyarrow_conversion(values, type_):
    built = column(tuple(values), type_)
    built.validate(full=True)
    assert built.equals(pa.array(values, type_))


def _server_row(i: int) -> tuple:
    return S.SERVER.row(server="io0", clock="io0", layer="trove", op="trove_write", callid=i, callids=[i],
                        rank=0, req_id=i, event_id=i, handle=7, size=4096, t_start=i, t_end=i + 1)


def test_concurrent_appends_are_flushed_exactly_once(tmp_path):
    log = PartLog(S.SERVER_SCHEMA, tmp_path, "server-io0", {}, flush_rows=97)
    def writer(k: int) -> None:
        for i in range(3000):
            log.append(_server_row(k * 10_000 + i))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    ids = pq.read_table(sorted(tmp_path.glob("*.parquet"))).column("event_id").to_pylist()
    assert sorted(ids) == sorted(k * 10_000 + i for k in range(4) for i in range(3000))


def test_a_row_of_the_wrong_width_is_an_error(tmp_path):
    log = PartLog(S.SERVER_SCHEMA, tmp_path, "s", {}, flush_rows=10)
    log.append(_server_row(1)[:-1])
    with pytest.raises(ValueError, match="columns"):
        log.flush()


def test_a_failed_write_keeps_the_rows_for_the_next_flush(tmp_path):
    log = PartLog(S.SERVER_SCHEMA, tmp_path / "d", "s", {}, flush_rows=1000)
    for i in range(5):
        log.append(_server_row(i))
    (tmp_path / "d").rename(tmp_path / "gone")  # (the write fails)
    with pytest.raises(InputError):
        log.flush()
    (tmp_path / "gone").rename(tmp_path / "d")
    log.append(_server_row(5))
    log.close()
    ids = pq.read_table(sorted((tmp_path / "d").glob("*.parquet"))).column("event_id").to_pylist()
    assert sorted(ids) == list(range(6))


def test_logging_does_not_import_pandas(tmp_path):
    code = (
        "import sys\nfrom callid_core import schema as S\nfrom callid_core.partlog import PartLog\n"
        f"log = PartLog(S.SERVER_SCHEMA, {str(tmp_path)!r}, 's', {{}}, flush_rows=2)\n"
        "for i in range(5):\n"
        "    log.append(S.SERVER.row(server='io0', clock='io0', layer='req', op='io_write', callid=i,\n"
        "                            callids=[i], event_id=i, t_start=i, t_end=i))\n"
        "log.close()\nassert 'pandas' not in sys.modules, 'pandas imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def _event_ids(paths) -> list[int]:
    return sorted(pq.read_table(sorted(paths), schema=S.SERVER_SCHEMA).column("event_id").to_pylist())


def test_rows_are_written_by_time_into_one_open_part_until_sealed(tmp_path):
    log = PartLog(S.SERVER_SCHEMA, tmp_path, "s", {}, flush_rows=10, flush_seconds=0.02)
    for i in range(3):
        log.append(_server_row(i))
    time.sleep(0.2)
    assert _event_ids(tmp_path.glob("*.parquet")) == [0, 1, 2]  # on disk, no flush asked
    assert log.parts() == []  # (open: not listed, it is rewritten)
    for i in range(3, 6):
        log.append(_server_row(i))
    time.sleep(0.2)
    assert [p.name for p in tmp_path.glob("*.parquet")] == ["s.000000.parquet"]  # the same part, rewritten
    assert _event_ids(tmp_path.glob("*.parquet")) == list(range(6))
    for i in range(6, 10):  # the open part reaches 10 rows: sealed, the next one opens
        log.append(_server_row(i))
    time.sleep(0.2)
    assert [p.name for p in log.parts()] == ["s.000000.parquet"]
    log.append(_server_row(10))
    log.append(_server_row(11))
    time.sleep(0.2)  # (both written by time: the flush that seals their part has no new row)
    assert log.flush() == tmp_path / "s.000001.parquet"
    assert [p.name for p in log.parts()] == ["s.000000.parquet", "s.000001.parquet"]
    log.close()
    assert [p.name for p in log.parts()] == ["s.000000.parquet", "s.000001.parquet"]
    assert _event_ids(log.parts()) == list(range(12))


def test_a_killed_process_loses_at_most_its_last_second(tmp_path):
    code = (
        "import sys, time\nfrom callid_core import schema as S\nfrom callid_core.partlog import PartLog\n"
        f"log = PartLog(S.SERVER_SCHEMA, {str(tmp_path)!r}, 's', {{}})\n"
        "for i in range(10):\n"
        "    log.append(S.SERVER.row(server='io0', clock='io0', layer='req', op='io_write', callid=i,\n"
        "                            callids=[i], event_id=i, t_start=i, t_end=i))\n"
        "    print(i, flush=True)\n"
        "    time.sleep(0.05)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(10):
            proc.stdout.readline()
        time.sleep(1.5)  # (more than the default second)
    finally:
        proc.kill()
        proc.wait()
    assert _event_ids(tmp_path.glob("*.parquet")) == list(range(10))


def test_a_log_written_whole_finds_every_changed_bit(tmp_path):
    """Every bit of a log written by ``log_writer`` is covered by its checksum: a flip is found, but in
    the key's own bytes, where the log then carries no checksum (which the merge warns of)."""
    table = pa.table({"a": pa.array(range(50), pa.int64()), "s": ["x", "yz"] * 25})
    path = tmp_path / "log.parquet"
    with log_writer(path, table.schema) as writer:
        writer.write_table(table)
    assert checksum.verify(path) is True and pq.read_table(path).equals(table)
    data = path.read_bytes()
    key = data.rfind(S.META_CHECKSUM.encode())
    flipped = tmp_path / "flipped.parquet"
    for at in range(len(data)):
        for bit in (0, 7):
            flipped.write_bytes(data[:at] + bytes([data[at] ^ 1 << bit]) + data[at + 1:])
            found = checksum.verify(flipped)
            assert found is False or (found is None and key <= at < key + len(S.META_CHECKSUM) + 2), at
