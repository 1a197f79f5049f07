"""lebf encoding: every request and each message answering it round-trip; bad bytes raise ProtocolError."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from server_sim import protocol as P

u64 = st.integers(0, 2**64 - 1)
u32 = st.integers(0, 2**32 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
hints = st.fixed_dictionaries(
    {}, optional={"callid": st.lists(u64, min_size=1, max_size=5), "rank": i64, "request_id": i64,
                  "callid_bytes": st.lists(u64, max_size=9), "note": st.text(max_size=10)})
CODEC_STRATEGIES = {
    id(P.U32): u32, id(P.U64): u64, id(P.I32): st.integers(-(2**31), 2**31 - 1), id(P.I64): i64,
    id(P.STR): st.text(max_size=40), id(P.BYTES): st.binary(max_size=200),
    id(P.REGIONS): st.lists(st.tuples(u64, u64), max_size=8), id(P.HINTS): hints,
}
#: Every request class with each class that may answer it, from the declarations.
PAIRS = [(req, answer) for req in P.REQUESTS.values()
         for answer in (req.REPLY, req.COMPLETION, P.ErrorResponse) if answer is not None]


def _strategy(codec):
    if isinstance(codec, P.ListOf) and codec is not P.REGIONS:
        return st.lists(_strategy(codec.elem), max_size=6)
    return CODEC_STRATEGIES[id(codec)]


def _fields(draw, cls):
    return {name: draw(_strategy(codec)) for name, codec in P.wire_fields(cls)}


@st.composite
def exchanges(draw):
    """A request and one message answering it (its reply, its completion or an error)."""
    req_cls, answer_cls = draw(st.sampled_from(PAIRS))
    req = req_cls(**_fields(draw, req_cls))
    return req, answer_cls(op=req.OP, **_fields(draw, answer_cls))


def _normal(msg):
    values = {f.name: getattr(msg, f.name) for f in dataclasses.fields(msg)}
    return {k: bytes(v) if isinstance(v, memoryview) else v for k, v in values.items()}


@given(exchanges())
def test_every_request_and_each_message_answering_it_round_trip(exchange):
    req, answer = exchange
    data = P.encode(req)
    assert len(data) % 4 == 0
    back = P.decode(data)
    assert type(back) is type(req)
    assert _normal(back) == _normal(req)
    data = P.encode(answer)
    assert len(data) % 4 == 0
    back = P.decode_reply(data, req, None if isinstance(answer, P.ErrorResponse) else type(answer))
    assert type(back) is type(answer)
    assert back.op == req.OP
    assert _normal(back) == _normal(answer)


def test_every_op_has_its_request_and_every_reply_answers_a_request():
    assert set(P.REQUESTS) == set(P.Op)
    assert all(cls.OP == op and cls.NAME == op.name.lower() for op, cls in P.REQUESTS.items())
    replies = {cls for cls in vars(P).values()
               if isinstance(cls, type) and issubclass(cls, P.Response) and cls is not P.Response}
    assert replies == {answer for _, answer in PAIRS}


def test_a_reply_answers_only_its_own_request():
    lookup, getattr_ = P.LookupRequest(path="/a"), P.GetattrRequest(path="/a")
    assert type(lookup.reply()) is P.AttrResponse and lookup.reply().op == P.Op.LOOKUP
    with pytest.raises(P.ProtocolError, match="does not answer a getattr"):
        P.decode_reply(P.encode(lookup.reply(handle=3)), getattr_)
    io = P.IoRequest()
    with pytest.raises(P.ProtocolError, match="WriteCompletion"):
        P.decode_reply(P.encode(io.completion(bytes_written=1)), io)  # (not the acknowledgement)
    with pytest.raises(P.ProtocolError):
        P.decode_reply(P.encode(io), io)
    unreadable = P.decode_reply(P.encode(P.ErrorResponse(P.Status.EPROTO)), io)  # (op 0: unreadable request)
    assert unreadable.status == P.Status.EPROTO and unreadable.op == 0


def test_the_header_names_the_op_and_which_message_of_it_this_is():
    req = P.TruncateRequest(handle=1, size=2)
    for msg, kind in ((req, P.Kind.REQUEST), (req.reply(size=2), P.Kind.REPLY), (req.error(P.Status.EIO),
                      P.Kind.ERROR), (P.IoRequest().completion(), P.Kind.COMPLETION)):
        raw = P.encode(msg)
        assert int.from_bytes(raw[8:12], "little") == msg.op
        assert int.from_bytes(raw[12:16], "little") == kind


def test_an_error_is_no_longer_than_the_acknowledgement_it_may_replace():
    """A read's acknowledgement is received together with its buffers: an error in its place
    must fit in the acknowledgement's room (bmi.recv_messages_into with short_first)."""
    io = P.IoRequest()
    assert len(P.encode(io.error(P.Status.EIO))) <= len(P.encode(io.reply()))


@given(exchanges(), st.data())
def test_truncated_or_extended_messages_are_rejected(exchange, data):
    for msg in exchange:
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
    raw = P.encode(P.GetsizeRequest(handle=7))
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
