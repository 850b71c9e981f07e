#!/usr/bin/env python3
"""Writes the hand-made seeds of h2_fuzz into corpus/h2/: what a client sends
after its preface, as frames (RFC 9113 §4), one conversation per file."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "h2")

DATA, HEADERS, PRIORITY, RST, SETTINGS, PUSH, PING, GOAWAY, WINDOW, CONT = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIO = 1, 1, 4, 8, 0x20


def frame(t, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([t, flags]) + struct.pack(">I", stream) + payload


def block(method=0x82, path=b"/"):
    """GET (0x82) or POST (0x83), :scheme http, :path as a literal, :authority."""
    return bytes([method, 0x86, 0x04, len(path)]) + path + b"\x01\x09localhost"


settings = frame(SETTINGS, 0, 0)
seeds = {
    "seed-get": settings + frame(HEADERS, END_STREAM | END_HEADERS, 1, block()),
    "seed-post-body": settings + frame(HEADERS, END_HEADERS, 1, block(0x83, b"/up"))
    + frame(DATA, 0, 1, b"a" * 100) + frame(DATA, END_STREAM, 1, b"b" * 10),
    "seed-three-streams": settings + b"".join(frame(HEADERS, END_STREAM | END_HEADERS, i, block(path=b"/p%d" % i))
                                             for i in (1, 3, 5)),
    "seed-reset": settings + frame(HEADERS, END_HEADERS, 1, block(0x83)) + frame(RST, 0, 1, struct.pack(">I", 8)),
    "seed-continuation": settings + frame(HEADERS, END_STREAM, 1, block()[:5]) + frame(CONT, END_HEADERS, 1, block()[5:]),
    "seed-ping-window": settings + frame(PING, 0, 0, b"12345678") + frame(WINDOW, 0, 0, struct.pack(">I", 1 << 20))
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, block(path=b"/abc")),
    "seed-settings-ack-window": frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 10)) + frame(SETTINGS, ACK, 0)
    + frame(HEADERS, END_STREAM | END_HEADERS, 1, block(path=b"/abc")) + frame(WINDOW, 0, 1, struct.pack(">I", 100)),
    "seed-padded-priority": settings
    + frame(HEADERS, END_STREAM | END_HEADERS | PADDED | PRIO, 1, b"\x02" + struct.pack(">IB", 0, 15) + block() + b"\0\0")
    + frame(PRIORITY, 0, 3, struct.pack(">IB", 1, 7)),
    "seed-goaway": settings + frame(HEADERS, END_STREAM | END_HEADERS, 1, block()) + frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0)),
    "seed-too-large": settings + frame(HEADERS, END_HEADERS, 1, block(0x83)) + frame(DATA, END_STREAM, 1, b"z" * 5000),
}

os.makedirs(OUT, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
print(f"wrote {len(seeds)} seeds into {OUT}")
