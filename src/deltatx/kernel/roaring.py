"""RoaringBitmapArray: the serialized form of a deletion vector's row set, in pure Python.

Delta stores the deleted row indexes of a file as a 64-bit Roaring bitmap (PROTOCOL.md,
"Deletion Vector Format"): a 4-byte little-endian magic number, then either the portable 64-bit
layout (magic ``1681511377``: an 8-byte bucket count, then per bucket in ascending order a
4-byte high key and a standard 32-bit RoaringBitmap) or Delta's older native layout (magic
``1681511376``, header big-endian: a 4-byte count of a dense array of 32-bit bitmaps, each
prefixed by its size).

The kernel must stay standard-library only, so the 32-bit RoaringBitmap portable format
(array, bitmap and run containers) is implemented here directly. Writers in ``deltatx.log``
use pyroaring, whose output is byte-identical to :func:`serialize` (a unit test proves it);
this module is the reference reader and the fallback writer.
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Iterable

from deltatx.errors import InvalidTableError

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376

_COOKIE_NO_RUN = 12346
_COOKIE_RUN = 12347
# Below this many containers the run-format header omits the offset table.
_NO_OFFSET_THRESHOLD = 4
# An array container holds at most this many values; more are stored as a 8 KiB bitmap.
_ARRAY_MAX = 4096
_BITMAP_BYTES = 8192
MAX_ROW_INDEX = 2**63 - 1


class _Reader:
    """A cursor over bytes that names where it was when the data ran out."""

    __slots__ = ("data", "pos", "where")

    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise InvalidTableError(
                f"{self.where}: deletion vector bitmap is truncated (needs {n} bytes at byte "
                f"{self.pos}, has {len(self.data) - self.pos})"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def u16(self) -> int:
        return int(struct.unpack("<H", self.take(2))[0])

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack("<Q", self.take(8))[0])

    def fail(self, why: str) -> InvalidTableError:
        return InvalidTableError(f"{self.where}: {why} (at byte {self.pos})")


def _array_values(raw: bytes) -> list[int]:
    values = array("H")
    values.frombytes(raw)
    if values.itemsize != 2:  # pragma: no cover - every CPython has 2-byte 'H'
        raise AssertionError("unsigned short is not 2 bytes")
    if array("H", [1]).tobytes() != b"\x01\x00":  # big-endian host
        values.byteswap()
    return values.tolist()


def _bitmap_values(raw: bytes) -> list[int]:
    out: list[int] = []
    words = struct.unpack("<1024Q", raw)
    for w_index, word in enumerate(words):
        base = w_index * 64
        while word:
            low = word & -word
            out.append(base + low.bit_length() - 1)
            word ^= low
    return out


def _read_roaring32(r: _Reader) -> list[int]:
    """Reads one 32-bit portable RoaringBitmap; returns its values in ascending order."""
    cookie = r.u32()
    run_flags = b""
    if cookie == _COOKIE_NO_RUN:
        count = r.u32()
        has_offsets = True
    elif cookie & 0xFFFF == _COOKIE_RUN:
        count = (cookie >> 16) + 1
        run_flags = r.take((count + 7) // 8)
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    else:
        raise r.fail(f"bad RoaringBitmap cookie {cookie}")
    if count > 65536:
        raise r.fail(f"RoaringBitmap claims {count} containers (at most 65536)")
    header = r.take(4 * count)
    keys_cards = struct.unpack(f"<{2 * count}H", header)
    if has_offsets:
        r.take(4 * count)  # offsets: containers follow in order, so they are not needed
    out: list[int] = []
    previous_key = -1
    for i in range(count):
        key, card = keys_cards[2 * i], keys_cards[2 * i + 1] + 1
        if key <= previous_key:
            raise r.fail("RoaringBitmap container keys are not ascending")
        previous_key = key
        high = key << 16
        is_run = bool(run_flags) and bool(run_flags[i // 8] >> (i % 8) & 1)
        if is_run:
            runs = r.u16()
            pairs = struct.unpack(f"<{2 * runs}H", r.take(4 * runs))
            lows: list[int] = []
            for j in range(runs):
                start, length = pairs[2 * j], pairs[2 * j + 1]
                if start + length > 0xFFFF:
                    raise r.fail("RoaringBitmap run container overflows its 16-bit range")
                lows.extend(range(start, start + length + 1))
        elif card <= _ARRAY_MAX:
            lows = _array_values(r.take(2 * card))
        else:
            lows = _bitmap_values(r.take(_BITMAP_BYTES))
        if len(lows) != card:
            raise r.fail(f"RoaringBitmap container holds {len(lows)} values, header says {card}")
        out.extend(high | low for low in lows)
    return out


def deserialize(data: bytes, *, where: str = "deletion vector") -> list[int]:
    """The row indexes of a serialized RoaringBitmapArray, ascending.

    Args:
        data: The serialized bitmap, magic number first.
        where: Names the bitmap (file and offset) in error messages.

    Raises:
        InvalidTableError: Bad magic, truncated or inconsistent data; the message says where.
    """
    r = _Reader(bytes(data), where)
    head = r.take(4)
    out: list[int] = []
    if struct.unpack("<I", head)[0] == PORTABLE_MAGIC:
        buckets = r.u64()
        previous = -1
        for _ in range(buckets):
            key = r.u32()
            if key > 0x7FFFFFFF or key <= previous:
                raise r.fail(f"bad RoaringBitmapArray bucket key {key}")
            previous = key
            high = key << 32
            out.extend(high | low for low in _read_roaring32(r))
    elif struct.unpack(">I", head)[0] == NATIVE_MAGIC:
        # The native layout's header is big-endian (Java's default byte order); only the
        # embedded 32-bit bitmaps are little-endian.
        (buckets,) = struct.unpack(">I", r.take(4))
        for key in range(buckets):
            (size,) = struct.unpack(">I", r.take(4))
            inner = _Reader(r.take(size), where)
            high = key << 32
            out.extend(high | low for low in _read_roaring32(inner))
            if inner.pos != size:
                raise r.fail("a native bitmap is shorter than its recorded size")
    else:
        raise InvalidTableError(
            f"{where}: bad deletion vector magic number {struct.unpack('<I', head)[0]} "
            f"(expected {PORTABLE_MAGIC})"
        )
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} unexpected bytes after the bitmap")
    return out


def _runs(values: list[int]) -> list[tuple[int, int]]:
    """Maximal runs of consecutive values as (start, length - 1) pairs."""
    runs: list[tuple[int, int]] = []
    start = prev = values[0]
    for v in values[1:]:
        if v != prev + 1:
            runs.append((start, prev - start))
            start = v
        prev = v
    runs.append((start, prev - start))
    return runs


def _write_roaring32(lows: list[int]) -> bytes:
    """One 32-bit RoaringBitmap in the portable format, as pyroaring writes it.

    Like pyroaring's default (run-optimised) bitmaps, a container is stored as runs when that
    is strictly smaller than its array or bitmap form; the run format's header (cookie 12347)
    is used only when some container is a run.
    """
    containers: list[tuple[int, list[int]]] = []
    for v in lows:
        key = v >> 16
        if not containers or containers[-1][0] != key:
            containers.append((key, []))
        containers[-1][1].append(v & 0xFFFF)
    n = len(containers)
    bodies: list[bytes] = []
    run_flags = bytearray((n + 7) // 8)
    keys = bytearray()
    for i, (key, values) in enumerate(containers):
        keys += struct.pack("<HH", key, len(values) - 1)
        runs = _runs(values)
        plain = 2 * len(values) if len(values) <= _ARRAY_MAX else _BITMAP_BYTES
        if 2 + 4 * len(runs) < plain:
            run_flags[i // 8] |= 1 << (i % 8)
            flat = [x for pair in runs for x in pair]
            bodies.append(struct.pack(f"<H{len(flat)}H", len(runs), *flat))
        elif len(values) <= _ARRAY_MAX:
            packed = array("H", values)
            if array("H", [1]).tobytes() != b"\x01\x00":
                packed.byteswap()
            bodies.append(packed.tobytes())
        else:
            bits = 0
            for low in values:
                bits |= 1 << low
            bodies.append(bits.to_bytes(_BITMAP_BYTES, "little"))
    if any(run_flags):
        header = bytearray(struct.pack("<I", _COOKIE_RUN | (n - 1) << 16)) + run_flags + keys
        with_offsets = n >= _NO_OFFSET_THRESHOLD
    else:
        header = bytearray(struct.pack("<II", _COOKIE_NO_RUN, n)) + keys
        with_offsets = True
    if with_offsets:
        offset = len(header) + 4 * n
        for body in bodies:
            header += struct.pack("<I", offset)
            offset += len(body)
    return bytes(header) + b"".join(bodies)


def serialize(rows: Iterable[int]) -> bytes:
    """The portable RoaringBitmapArray serialization of ``rows`` (magic ``1681511377``).

    Raises:
        InvalidTableError: A row index is negative or above 2**63 - 1.
    """
    values = sorted(set(rows))
    if values and (values[0] < 0 or values[-1] > MAX_ROW_INDEX):
        bad = values[0] if values[0] < 0 else values[-1]
        raise InvalidTableError(f"row index {bad} is out of range for a deletion vector")
    buckets: list[tuple[int, list[int]]] = []
    for v in values:
        key = v >> 32
        if not buckets or buckets[-1][0] != key:
            buckets.append((key, []))
        buckets[-1][1].append(v & 0xFFFFFFFF)
    out = bytearray(struct.pack("<IQ", PORTABLE_MAGIC, len(buckets)))
    for key, lows in buckets:
        out += struct.pack("<I", key)
        out += _write_roaring32(lows)
    return bytes(out)
