#!/usr/bin/env python3
"""Writes the seed call scripts of the server-message fuzz target (fuzz_server.cpp says the
format) into tests/fuzz/server_corpus/, named by content hash: honest rounds, and the classes of
hostile calls issue 27 found (silo numbers outside the run, wrong tokens, sizes that overflow,
replies refused again and again, parked calls cancelled). Protobuf is encoded by hand (the
messages are in runtime/net/proto/fvi/v1/federation.proto) so that no Python package is needed."""
import hashlib
import os
import struct


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number, wire, payload):
    return varint((number << 3) | wire) + payload


def v(number, n):
    return field(number, 0, varint(n))


def s(number, data):
    data = data.encode() if isinstance(data, str) else data
    return field(number, 2, varint(len(data)) + data)


def fixed64(number, n):
    return field(number, 1, struct.pack("<Q", n))


def who(silo, token=None, model="fuzz", fingerprint=0x1234, protocol=2):
    token = {1: "token-one", 2: "token-two", 3: "token-three"}.get(silo, "") if token is None else token
    return s(1, v(1, protocol) + s(2, model) + fixed64(3, fingerprint) + v(4, silo) + s(5, token))


def join(silo, **kw):
    return record(0, who(silo, **kw) + s(2, f"silo {silo}: seed") + v(3, 1))


def poll(silo, **kw):
    return record(1, who(silo, **kw))


def submit(silo, values, round_=1, phase=1, exchange=0, count=None, error="", **kw):
    body = who(silo, **kw) + v(2, exchange) + v(3, round_) + v(4, phase)
    body += s(5, b"".join(struct.pack("<d", x) for x in values))
    if error:
        body += s(6, error)
    body += v(7, len(values) if count is None else count)
    return record(2, body)


def record(kind, body):
    return bytes([kind]) + struct.pack("<H", len(body)) + body


CANCEL, NEXT = record(3, b""), record(4, b"")


def cert(name):
    return record(5, name.encode())


SEEDS = {
    "honest round": join(1) + join(2) + join(3) + poll(1) + poll(2) + poll(3)
    + submit(1, [0.1, 0.2, 0.3, 0.4]) + submit(2, [1, 2, 3, 4]) + submit(3, [0, 0, 0, 0]) + NEXT
    + poll(1) + submit(1, [0.5] * 4, round_=2),
    "silos outside the run": join(0) + join(4) + join(2**32 - 1) + join(2**31) + poll(2**32 - 1)
    + submit(2**32 - 1, [1, 2, 3, 4]),
    "wrong credentials": join(1, token="token-two") + join(2, token="") + join(1, protocol=1)
    + join(1, fingerprint=7) + join(1, model="other\n\x1b[2J") + submit(1, [1] * 4, token="x"),
    "sizes": poll(1) + submit(1, [1] * 3) + submit(1, [1] * 5) + submit(1, [1] * 4, count=2**64 - 1)
    + submit(1, [1] * 4, count=2) + submit(1, [], count=4) + submit(1, [float("nan")] * 4)
    + submit(1, [1e300, 1e300, -1e300, -1e300]),
    "refused again and again": poll(1) + b"".join(submit(1, [1] * 3) for _ in range(7)) + submit(1, [1] * 4) + NEXT,
    "stale and repeated": poll(2) + submit(2, [1] * 4, round_=0) + submit(2, [1] * 4, exchange=12345)
    + submit(2, [1] * 4, phase=99) + submit(2, [1] * 4) + submit(2, [1] * 4) + NEXT + submit(2, [1] * 4),
    "an error reply": poll(3) + submit(3, [], error="the silo could not \x00 do it") + NEXT + NEXT,
    "parked and cancelled": NEXT + poll(1) + poll(1) + poll(1) + poll(1) + poll(1) + CANCEL + CANCEL + NEXT + poll(1),
    "certificates": cert("silo-1") + join(1) + cert("silo-2") + poll(1) + cert("") + submit(1, [1] * 4),
}


def main():
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server_corpus")
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        data = (b"\x03" if name == "certificates" else b"\x01") + data  # the policy: tokens (and certificates)
        path = os.path.join(out, hashlib.sha1(data).hexdigest()[:16])
        with open(path, "wb") as f:
            f.write(data)
        print(f"{path}: {name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
