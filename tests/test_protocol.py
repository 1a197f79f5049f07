"""lebf encoding: every message round-trips; malformed bytes raise ProtocolError."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server_sim import protocol as P

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
CODEC_STRATEGIES = {
    id(P.U32): u32, id(P.U64): u64, id(P.I32): st.integers(-(2**31), 2**31 - 1), id(P.I64): i64,
    id(P.STR): st.text(max_size=40), id(P.BYTES): st.binary(max_size=200),
    id(P.REGIONS): st.lists(st.tuples(u64, u64), max_size=8),
}


def _strategy(codec):
    if isinstance(codec, P.ListOf) and codec is not P.REGIONS:
        return st.lists(_strategy(codec.elem), max_size=6)
    return CODEC_STRATEGIES[id(codec)]


hints = st.fixed_dictionaries(
    {}, optional={"callid": st.lists(u64, min_size=1, max_size=5), "rank": i64, "request_id": i64,
                  "note": st.text(max_size=10)})


@st.composite
def messages(draw):
    cls = draw(st.sampled_from(P.all_messages()))
    kwargs = {name: draw(_strategy(codec)) for name, codec in P._FIELDS[cls]}
    kwargs["hints"] = draw(hints)
    if issubclass(cls, P.Response):
        kwargs.update(status=draw(st.integers(0, 100)), t_recv=draw(i64), t_send=draw(i64))
    return cls(**kwargs)


def _normal(msg):
    values = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in values.items()}


@given(messages())
def test_every_message_round_trips(msg):
    data = P.encode(msg)
    assert len(data) % 4 == 0
    back = P.decode(data)
    assert type(back) is type(msg)
    assert _normal(back) == _normal(msg)


@given(messages(), st.data())
def test_truncated_or_extended_messages_are_rejected(msg, data):
    raw = bytes(P.encode(msg))
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(P.ProtocolError):
        P.decode(raw[:cut])
    with pytest.raises(P.ProtocolError):
        P.decode(raw + b"\0" * 8)


@given(st.binary(max_size=300))
def test_garbage_never_raises_anything_but_protocol_error(raw):
    try:
        P.decode(raw)
    except P.ProtocolError:
        pass


def test_eight_byte_values_are_aligned_and_strings_padded():
    raw = P.encode(P.LookupRequest(path="/pvfs2/a"))
    # header 16 bytes, hint count u32, then the path: u32 length, bytes, NUL, pad to 8
    assert raw[16:20] == b"\0\0\0\0"
    assert raw[20:24] == (8).to_bytes(4, "little")
    assert raw[24:33] == b"/pvfs2/a\0"
    assert len(raw) % 8 == 0
    raw = P.encode(P.HandleRequest(handle=7))
    assert raw[20:24] == b"\0\0\0\0"  # 4-byte skip before the u64 handle
    assert int.from_bytes(raw[24:32], "little") == 7


def test_bad_magic_and_version_are_named():
    raw = bytearray(P.encode(P.PingRequest()))
    raw[0] ^= 0xFF
    with pytest.raises(P.ProtocolError, match="magic"):
        P.decode(raw)
    raw = bytearray(P.encode(P.PingRequest()))
    raw[4] = 99
    with pytest.raises(P.ProtocolError, match="version"):
        P.decode(raw)
