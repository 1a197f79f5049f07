"""BMI framing and the receives of the hot path: scatter receives, a response with the buffers behind it."""

from __future__ import annotations

import socket
import threading

import pytest

from server_sim import bmi


def test_scatter_receive_fills_every_piece_and_checks_the_frame_first():
    a, b = socket.socketpair()
    try:
        payload = bytes(range(256)) * 40
        framed = b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, 9, payload))
        chunks = [framed[i:i + 1000] for i in range(0, len(framed), 1000)]
        sender = threading.Thread(target=lambda: [a.sendall(c) for c in chunks])
        sender.start()
        pieces = [bytearray(1), bytearray(4000), bytearray(len(payload) - 4001)]
        bmi.recv_expected_into(b, 9, *map(memoryview, pieces))
        sender.join()
        assert b"".join(pieces) == payload
        # a message of another size is refused at its header, without waiting for the expected bytes
        a.sendall(b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, 9, b"short")))
        with pytest.raises(bmi.BmiError, match="size 5"):
            bmi.recv_expected_into(b, 9, memoryview(bytearray(100)))
    finally:
        a.close()
        b.close()


def _framed(tag: int, payload: bytes) -> bytes:
    return b"".join(bytes(v) for v in bmi.frame(bmi.MODE_EXPECTED, tag, payload))


def test_one_call_receives_a_response_and_the_buffers_behind_it_or_a_short_error():
    a, b = socket.socketpair()
    try:
        ack, data = bytes(range(64)), bytes(range(256)) * 300
        stream = _framed(4, ack) + _framed(4, data[:50000]) + _framed(4, data[50000:])
        sender = threading.Thread(target=lambda: [a.sendall(stream[i:i + 999])
                                                  for i in range(0, len(stream), 999)])
        sender.start()
        raw, first, second = bytearray(64), bytearray(20000), bytearray(len(data) - 20000)
        views = [memoryview(first), memoryview(second)]
        n = bmi.recv_messages_into(b, 4, [[memoryview(raw)], [views[0], views[1][:30000]],
                                          [views[1][30000:]]], short_first=True)
        sender.join()
        assert (n, bytes(raw), bytes(first + second)) == (64, ack, data)
        # a shorter first message (an error response) is all there is: nothing more is read
        a.sendall(_framed(4, b"e" * 44))
        raw = bytearray(64)
        assert bmi.recv_messages_into(b, 4, [[memoryview(raw)], [memoryview(bytearray(10))]],
                                      short_first=True) == 44
        assert bytes(raw[:44]) == b"e" * 44
        # ... unless more follows it: then the framing is lost, and said so
        a.sendall(_framed(4, b"e" * 44) + _framed(4, b"x" * 10))
        with pytest.raises(bmi.BmiError, match="more data behind"):
            bmi.recv_messages_into(b, 4, [[memoryview(bytearray(64))], [memoryview(bytearray(10))]],
                                   short_first=True)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("size", [0, 10, 64, 100, 5000])
def test_a_response_of_any_size_arrives_whole_with_an_expected_size(size):
    a, b = socket.socketpair()
    try:
        payload = bytes(i % 251 for i in range(size))
        a.sendall(_framed(8, payload))
        assert bytes(bmi.recv_expected(b, 8, expect=64)) == payload
        a.sendall(_framed(9, payload))
        with pytest.raises(bmi.BmiError, match="tag 9"):
            bmi.recv_expected(b, 8, expect=64)
    finally:
        a.close()
        b.close()


def _handshake(client_secret: bytes, server_secret: bytes) -> tuple[Exception | None, Exception | None]:
    """Both halves of the handshake over a socket pair; what each side raised (None: nothing)."""
    a, b = socket.socketpair()
    raised: list[Exception | None] = [None, None]

    def server() -> None:
        try:
            bmi.authenticate(b, server_secret, 10.0)
        except Exception as exc:  # noqa: BLE001 (checked by the test)
            raised[1] = exc

    thread = threading.Thread(target=server)
    thread.start()
    try:
        bmi._prove(a, client_secret, "test")
    except Exception as exc:  # noqa: BLE001
        raised[0] = exc
    thread.join(5)
    a.close()
    b.close()
    return raised[0], raised[1]


def test_the_handshake_passes_with_the_secret_and_refuses_a_wrong_one():
    key = bytes(range(32))
    assert _handshake(key, key) == (None, None)
    client, server = _handshake(b"w" * 32, key)
    assert isinstance(server, bmi.Refused) and "proof is wrong" in str(server)
    assert isinstance(client, bmi.BmiError) and "refused the connection" in str(client)


def test_a_client_checks_that_the_server_holds_the_secret_too():
    """A server that accepts any proof but cannot compute its own (an impostor on the port)."""
    a, b = socket.socketpair()
    try:
        bmi.send(b, bmi.MODE_AUTH, 0, bmi.HELLO.pack(0, bmi.HANDSHAKE_VERSION, bytes(32)))
        b.sendall(b"".join(bytes(v) for v in bmi.frame(bmi.MODE_AUTH, 0, bmi.VERDICT.pack(0, bytes(32)))))
        with pytest.raises(bmi.BmiError, match="does not hold the file system's secret"):
            bmi._prove(a, bytes(32), "impostor")
        # a refusal in the hello (a full server) is said so
        a2, b2 = socket.socketpair()
        bmi.refuse(b2, 11)
        with pytest.raises(bmi.BmiError, match="refused the connection: Resource temporarily unavailable"):
            bmi._prove(a2, bytes(32), "full")
        a2.close()
        b2.close()
    finally:
        a.close()
        b.close()


def test_a_request_instead_of_a_proof_is_refused_with_its_tag_and_size():
    a, b = socket.socketpair()
    try:
        a.sendall(b"".join(bytes(v) for v in bmi.frame(bmi.MODE_UNEXPECTED, 77, b"0123456789")))
        with pytest.raises(bmi.Refused) as refused:
            bmi.authenticate(b, bytes(32), 10.0)
        assert refused.value.request == (77, 10)
    finally:
        a.close()
        b.close()


def test_a_payload_is_allocated_as_its_bytes_arrive():
    """A peer that announces 16 MiB and sends 100 KiB makes the receiver hold about 100 KiB."""
    import tracemalloc

    def sender(sock: socket.socket, data: bytes) -> threading.Thread:
        thread = threading.Thread(target=lambda: (sock.sendall(data), sock.shutdown(socket.SHUT_WR)))
        thread.start()
        return thread

    a, b = socket.socketpair()
    try:
        thread = sender(a, b"x" * 100_000)
        tracemalloc.start()
        with pytest.raises(bmi.BmiError, match="closed"):
            bmi.recv_payload(b, bmi.MESSAGE_LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        thread.join()
        assert peak < 1 << 20
    finally:
        a.close()
        b.close()
    a, b = socket.socketpair()
    try:
        thread = sender(a, bytes(range(256)) * 1000)
        assert bmi.recv_payload(b, 256_000) == bytes(range(256)) * 1000
        thread.join()
    finally:
        a.close()
        b.close()
