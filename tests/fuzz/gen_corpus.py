#!/usr/bin/env python3
"""Write the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): a few small valid
inputs each, so the fuzzers start past the magic numbers and checksums. Run from anywhere;
it rewrites only the files it names."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fnv1a(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


# ---- fuzz_wire: 48-byte frame header, optional u64 limit, packed socket address ----
def wire(type_, chan=0, flags=0, credits=0, tag=0, ln=0, key=0, off=0, imm=0, status=0):
    return struct.pack("<HBBBBHQQQQIi", 0x4C54, 2, type_, chan, flags, credits, tag, ln, key,
                       off, imm, status)


LIMIT = struct.pack("<Q", 1 << 20)
V4 = bytes([2]) + struct.pack(">H", 29500) + bytes([127, 0, 0, 1]) + bytes(12)
V6 = bytes([10]) + struct.pack(">H", 29500) + bytes(15) + bytes([1])
put("wire", "hello_bulk", wire(1, flags=0x08, tag=3) + LIMIT + V4)
put("wire", "msg", wire(2, chan=1, credits=4, tag=77, ln=100) + LIMIT + V6)
put("wire", "write_imm", wire(4, flags=0x01, tag=9, ln=4096, key=(5 << 32) | 1, off=8192,
                              imm=0xABCD))
put("wire", "ack_status", wire(6, tag=9, status=-5))
put("wire", "fence", wire(8, tag=12))

# ---- fuzz_rdesc: u8 mode, u8 peer, 128 descriptor bytes ----
TCP_ID = (lambda h: (h ^ (h >> 16)) & 0xFFFF)(fnv1a(b"tcp"))


def rdesc(owner, addr, ln, access, kind, key, rkeys):
    b = bytearray(128)
    struct.pack_into("<BBHI", b, 0, 1, len(rkeys), TCP_ID, owner)
    struct.pack_into("<QQIIQ", b, 8, addr, ln, access, kind, key)
    for i, k in enumerate(rkeys):
        struct.pack_into("<Q", b, 40 + 8 * i, k)
    struct.pack_into("<I", b, 104, 0x4452544C)
    struct.pack_into("<I", b, 108, fnv1a(bytes(b[:104])))
    return bytes(b)


put("rdesc", "emulated", bytes([0, 3]) + rdesc(3, 0x7F0000001000, 1 << 20, 3, 0, (7 << 32) | 1, []))
put("rdesc", "two_rails", bytes([0, 1]) + rdesc(1, 0x10000, 4096, 1, 1, (9 << 32) | 2, [11, 12]))
# Regressions: fields lite_mr_reg never registers, with the checksum repaired (mode 0x0f).
put("rdesc", "unknown_access", bytes([0x0F, 2]) + rdesc(2, 0x1000, 64, 0x7F, 0, 1 << 32 | 1, []))
put("rdesc", "wraps", bytes([0x0F, 2]) + rdesc(2, (1 << 64) - 16, 64, 1, 0, 1 << 32 | 1, []))
put("rdesc", "unknown_kind", bytes([0x0F, 2]) + rdesc(2, 0x1000, 64, 1, 9, 1 << 32 | 1, []))

# ---- fuzz_efa_wire: u8 selector (0 blob, 1 header, 2 flush, 3 provider, 4 plan, 5 pull) ----
def blob(pid, names):
    b = bytes([2, len(names), 0, 0]) + struct.pack("<I", pid)
    for n in names:
        b += bytes([len(n)]) + n
    return b


put("efa_wire", "blob_2rails", bytes([0]) + blob(4242, [bytes(range(16)), b"\x02\x00\x75\x30" * 4]))
hdr = struct.pack("<BBBBHHIIQ", 0xEF, 1, 0, 0, 64, 0, 3, 17, 99)
put("efa_wire", "hdr_msg", bytes([1]) + hdr + b"payload")
big = struct.pack("<BBBBHHIIQQ", 0xEF, 2, 1, 1, 0, 0, 3, 18, 100, 1 << 20)
put("efa_wire", "hdr_big", bytes([1]) + big)
put("efa_wire", "flush_2rails", bytes([2]) + bytes([1, 2, 0, 0, 0, 0, 0, 0]) +
    struct.pack("<QQQQ", 0x1000, 5, 0x2000, 6))
put("efa_wire", "provider_tcp", bytes([3, 64]) + b"tcp\0")
put("efa_wire", "pull_2seg", bytes([5]) + struct.pack("<Q", 1 << 20) +
    struct.pack("<IIIIQ", 0xC0C0, 1, 3, 2, 77) +
    struct.pack("<QQII", 0x7f0000001000, 0, 8192, 2) + struct.pack("<QQII", 0x7f0000004000, 65536, 4096, 1))
put("efa_wire", "plan", bytes([4]) + struct.pack("<QBQBB", 1 << 22, 2, 1 << 18, 12, 0) +
    struct.pack("<I", 1))

# ---- fuzz_rdma_wire: u8 selector (0 frame, 1 window, 2 gid, 3 choose, 4 plan) ----
first = struct.pack("<BBBBHHQQ", 0x4D, 0, 0, 0, 8, 0, 42, 5000)
put("rdma_wire", "frame_first", bytes([0]) + struct.pack("<I", 4096) + first + bytes(100))
put("rdma_wire", "frame_cont", bytes([0]) + struct.pack("<I", 4096) + bytes([0x43]) + bytes(7) +
    bytes(50))
put("rdma_wire", "window", bytes([1, 64, 1, 0]) + bytes([0, 8, 2, 2, 3, 3, 4]) +
    bytes([1]) + struct.pack("<Q", (1 << 48) | 2) + bytes([0, 200]))
put("rdma_wire", "gid_v4", bytes([2]) + b"192.0.2.1\0")
put("rdma_wire", "gid_v6", bytes([2]) + b"fd00::5\0")
cand = b""
for idx, gid, typ, nd in [(0, bytes([0xFE, 0x80]) + bytes(13) + b"\x01", 2, b"eth0"),
                          (1, bytes(10) + b"\xff\xff" + bytes([192, 0, 2, 1]), 2, b"eth0"),
                          (2, bytes(10) + b"\xff\xff" + bytes([192, 0, 2, 1]), 1, b"eth0")]:
    cand += bytes([idx]) + gid + bytes([typ]) + nd + b"\0"
put("rdma_wire", "choose", bytes([3, 3, 0xFF]) + bytes(10) + b"\xff\xff" + bytes([192, 0, 2, 1]) +
    b"eth0\0" + cand)
put("rdma_wire", "plan", bytes([4]) + struct.pack("<QBIQIQ", 1 << 24, 2, 0, 1 << 20, 4096, 1 << 30))
# 5 resume: rails, kind (bit 0: RESUMED), link epoch, state (bit 0 ready, 1 retry, 2 frames
# kept), frames sent, first kept; then RESUME (epoch, rails, frames applied, immediates counted per
# rail, 28-byte QP ends: msg, then out and in of each rail) or RESUMED (epoch).
def resume(epoch, rails, applied, imms):
    return (struct.pack("<IIQ", epoch, rails, applied) + b"".join(struct.pack("<Q", i) for i in imms)
            + bytes(range(28 * (1 + 2 * rails))))


put("rdma_wire", "resume_2rails", bytes([5, 2, 0]) + struct.pack("<IBQQ", 4, 4, 10, 7) +
    resume(4, 2, 7, [3, 0]))
put("rdma_wire", "resume_wrong_rails", bytes([5, 1, 0]) + struct.pack("<IBQQ", 4, 0, 10, 0) +
    resume(4, 2, 10, [3, 0]))
put("rdma_wire", "resumed", bytes([5, 1, 1]) + struct.pack("<IBQQ", 4, 1, 0, 0) +
    struct.pack("<I", 4))

# ---- fuzz_config_json: the file itself ----
put("config_json", "full", b'{"rank": 1, "world_size": 4, "root": "10.0.0.1:29500", '
    b'"transport": "tcp", "log_level": "info", "init_timeout_ms": 5000, '
    b'"op_timeout_ms": -1, "credits": 32, "rndv_threshold": 8192}\n')
put("config_json", "v6_root", b'{"root": "[fe80::1%eth0]:1234", "log_level": 2}')
put("config_json", "empty", b"{}")

# ---- fuzz_config_env: u8 range selector, then u8 variable index + value + NUL ----
def env(sel, pairs):
    return bytes([sel]) + b"".join(bytes([i]) + v + b"\0" for i, v in pairs)


put("config_env", "litetx", env(0, [(0, b"1"), (1, b"4"), (2, b"[::1]:29500"), (3, b"tcp"),
                                    (4, b"debug"), (7, b"16"), (8, b"4096")]))
put("config_env", "torchrun", env(1, [(10, b"2"), (13, b"8"), (15, b"10.1.2.3"),
                                      (16, b"29400")]))
put("config_env", "cpulist", env(2, [(5, b"0-3,8,10-11"), (6, b"-1")]))
put("config_env", "efa", env(3, [(17, b"tcp"), (18, b"2"), (19, b"4096"), (21, b"cq32")]))


# ---- fuzz_quic_stream: u8 selector, context, then a stream (even) or a HELLO's fields (odd) ----
# Context: rank, world - rank - 1, nonce, base of the peers' nonces (rank r's is base + r),
# dialled + 1, certificate byte (bit 0: checked; the rest: its rank + 1), the tag refused.
QN, QB = 0x1111111111111111, 0x2000


def qctx(rank=1, world=2, dialled=-1, cert=0, refuse=(1 << 64) - 1):
    return (bytes([rank, world - rank - 1]) + struct.pack("<QQ", QN, QB) +
            bytes([dialled + 1, cert]) + struct.pack("<Q", refuse))


HELLO0 = wire(1, tag=0, key=QN, off=QB)
SMALL = wire(2, chan=1, credits=2, tag=10, ln=100) + bytes(range(100))
BIG = wire(2, tag=12, ln=5000) + bytes(i % 251 for i in range(5000))
put("quic_stream", "hello_small_big", bytes([0]) + qctx() + struct.pack("<I", 7) + HELLO0 + SMALL +
    BIG)
# Rank 0 dialled rank 1, whose certificate must be rank 1's.
put("quic_stream", "client_ca", bytes([0]) + qctx(rank=0, world=3, dialled=1, cert=1 | (2 << 1)) +
    struct.pack("<I", 99) + wire(1, tag=1, key=QN, off=QB + 1) + SMALL)
put("quic_stream", "frame_before_hello", bytes([0]) + qctx() + struct.pack("<I", 3) + SMALL)
put("quic_stream", "hello_check", bytes([1]) + qctx(rank=3, world=4) + bytes([2, 1, 1]))
# Preamble (selector 2): context, link state (u8 flags: state 0 init 1 up 2 down 3 failed, 4
# another connection, 8 resumable; u32 link epoch, u32 this connection's epoch, u64 taken before,
# u64 queued), then HELLO (rank, this rank's nonce, the sender's, epoch) and ACK (bytes taken).
def qpre(flags, link_ep, conn_ep, acked, end, rank, epoch, took):
    return (bytes([flags]) + struct.pack("<IIQQ", link_ep, conn_ep, acked, end) +
            wire(1, tag=rank, key=QN, off=QB + rank, imm=epoch) + wire(8, key=took))


put("quic_stream", "preamble_resume", bytes([2]) + qctx() + qpre(2 | 8, 2, 0, 100, 500, 0, 3, 300))
put("quic_stream", "preamble_takeover", bytes([2]) + qctx() + qpre(1 | 8, 2, 0, 0, 40, 0, 3, 40))
put("quic_stream", "preamble_client", bytes([2]) + qctx(rank=0, world=2, dialled=1) +
    qpre(0, 0, 0, 0, 0, 1, 0, 0))
put("quic_stream", "preamble_bad_ack", bytes([2]) + qctx() + qpre(0, 0, 0, 0, 10, 0, 0, 11))


# ---- fuzz_bootstrap: u8 world - 1, then one frame: u32 magic, type, rank, world, len | payload ----
def bs(type_, rank, world, payload):
    return struct.pack("<IIIII", 0x5342544C, type_, rank, world, len(payload)) + payload


def settings(credits=64, rndv=65536):
    return b"LX\x01\x00" + struct.pack("<IQ", credits, rndv)


def table(blobs):
    return b"".join(struct.pack("<I", len(b)) + b for b in blobs)


ADDR = bytes([2]) + struct.pack(">H", 40000) + bytes([127, 0, 0, 1]) + bytes(12)
put("bootstrap", "hello", bytes([1]) + bs(1, 1, 2, settings() + ADDR))
put("bootstrap", "table2", bytes([1]) + bs(2, 0, 2, table([settings() + ADDR, settings() + ADDR])))
put("bootstrap", "table3_mismatch", bytes([2]) + bs(2, 0, 3, table(
    [settings() + ADDR, settings(credits=32) + ADDR, settings() + ADDR])))
put("bootstrap", "abort", bytes([3]) + bs(3, 1002, 4, b"rank 2 runs world size 3\0"))
put("bootstrap", "abort_old", bytes([3]) + bs(3, 0, 4, b"rank 3 did not arrive\0"))
