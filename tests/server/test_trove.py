"""Trove (bstreams as real files) and the metadata store (sqlite3), on their own."""

from __future__ import annotations

import os
import threading

import pytest

from server_sim.trove import MetaStore, SizeTrove, Trove


def test_list_writes_and_reads_move_the_bytes_of_every_segment(tmp_path):
    trove = Trove(tmp_path)
    trove.create(7)
    data = bytes(range(256)) * 4
    assert trove.write_list(7, [(0, 100), (4096, 300), (200, 624)], memoryview(data)) == 1024
    out = bytearray(1024)
    assert trove.read_list(7, [(0, 100), (4096, 300), (200, 624)], memoryview(out)) == 1024
    assert out == data
    assert trove.size(7) == 4396
    with open(tmp_path / "bstreams" / f"{7:016x}.bstream", "rb") as f:  # a real file, bytes in place
        raw = f.read()
    assert raw[:100] == data[:100] and raw[4096:4396] == data[100:400] and raw[200:824] == data[400:]


def test_reads_past_the_end_or_of_a_missing_bstream_are_zeros(tmp_path):
    trove = Trove(tmp_path)
    trove.create(1)
    trove.write_list(1, [(0, 10)], memoryview(b"x" * 10))
    out = bytearray(b"?" * 30)
    assert trove.read_list(1, [(5, 10), (100, 20)], memoryview(out)) == 5
    assert out == b"x" * 5 + bytes(25)
    assert trove.read_list(99, [(0, 4)], memoryview(out)) == 0 and out[:4] == bytes(4)
    assert trove.size(99) == 0


def test_truncate_flush_remove_and_restart(tmp_path):
    trove = Trove(tmp_path)
    trove.create(3)
    trove.write_list(3, [(0, 8)], memoryview(b"abcdefgh"))
    trove.truncate(3, 4)
    trove.flush(3)
    trove.close()
    again = Trove(tmp_path)  # a restarted server finds its bytes
    out = bytearray(8)
    assert again.read_list(3, [(0, 8)], memoryview(out)) == 4 and out == b"abcd" + bytes(4)
    assert again.remove(3) and not again.remove(3)
    assert again.size(3) == 0 and os.listdir(tmp_path / "bstreams") == [Trove.EXPLICIT]
    again.close()


@pytest.mark.parametrize("cls", [Trove, SizeTrove])
def test_only_a_created_datafile_is_written_or_truncated(tmp_path, cls):
    trove = cls(tmp_path)
    data = None if cls is SizeTrove else memoryview(b"x" * 4)
    for op in (lambda: trove.write_list(5, [(0, 4)], data), lambda: trove.truncate(5, 1 << 40)):
        with pytest.raises(FileNotFoundError):
            op()
    assert not trove.exists(5) and not (tmp_path / "bstreams" / f"{5:016x}.bstream").exists()
    trove.create(5)
    assert trove.exists(5) and trove.write_list(5, [(0, 4)], data) == 4
    trove.create(5)  # (again: kept as it is)
    assert trove.size(5) == 4
    trove.close()


def test_a_storage_of_an_earlier_callid_makes_datafiles_at_their_first_write(tmp_path):
    (tmp_path / "bstreams").mkdir()  # (an earlier callid wrote no marker)
    trove = Trove(tmp_path)
    assert trove.write_list(5, [(0, 4)], memoryview(b"abcd")) == 4 and trove.exists(6)
    trove.close()
    assert not (tmp_path / "bstreams" / Trove.EXPLICIT).exists()
    assert not Trove(tmp_path / "new").implicit and Trove(tmp_path / "new").exists(5) is False


def test_the_namespace_creates_looks_up_and_removes_files_with_fresh_handles(tmp_path):
    meta = MetaStore(tmp_path)
    a = meta.create("/pvfs2/a", 65536, ["io0", "io1"])
    b = meta.create("/pvfs2/b", 4096, ["io1"])
    assert meta.create("/pvfs2/a", 1, ["io0"]) is None  # exists
    assert meta.lookup("/pvfs2/a") == a and a[1] == 65536 and [s for s, _ in a[2]] == ["io0", "io1"]
    handles = [a[0], *(h for _, h in a[2]), b[0], *(h for _, h in b[2])]
    assert len(set(handles)) == len(handles)
    assert meta.remove("/pvfs2/a") == a[2] and meta.lookup("/pvfs2/a") is None
    assert meta.remove("/pvfs2/a") is None
    meta.close()
    again = MetaStore(tmp_path)  # survives a restart, and handles are never reused
    assert again.lookup("/pvfs2/b") == b
    c = again.create("/pvfs2/c", 4096, ["io0"])
    assert c[0] not in handles and c[2][0][1] not in handles
    again.close()


def test_the_shared_file_pointer_is_fetch_and_add_under_concurrency(tmp_path):
    meta = MetaStore(tmp_path)
    got: list[int] = []
    lock = threading.Lock()

    def bump() -> None:
        for _ in range(50):
            previous = meta.shared_fp(42, 10, assign=False)
            with lock:
                got.append(previous)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(0, 2000, 10))  # every fetch saw a distinct value
    assert meta.shared_fp(42, 5, assign=True) == 2000 and meta.shared_fp(42, 0, assign=False) == 5
    meta.close()
