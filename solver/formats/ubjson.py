"""A bounded decoder for UBJSON (Universal Binary JSON), XGBoost's binary model format.

Typed numeric arrays become int64/float64 numpy arrays; every length is checked against the data
left and containers nest at most MAX_NESTING deep, so a corrupt or hostile file fails fast with a
ForestFormatError naming the byte offset.
"""

from typing import Any

import numpy as np

from .errors import ForestFormatError

MAX_NESTING = 64
_MAX_UNTYPED_ITEMS = 10_000_000
_NUMBERS = {  # marker -> (big-endian numpy dtype, size)
    b"i": (">i1", 1),
    b"U": (">u1", 1),
    b"I": (">i2", 2),
    b"l": (">i4", 4),
    b"L": (">i8", 8),
    b"d": (">f4", 4),
    b"D": (">f8", 8),
}
_INTEGER_MARKERS = (b"i", b"U", b"I", b"l", b"L")


def decode(data: bytes) -> Any:
    """The value encoded in ``data`` (dicts, lists, numpy arrays, str, int, float, bool, None)."""
    reader = _Reader(data)
    return reader.value(reader.marker(), 0)


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0
        self.end = len(data)

    def fail(self, message: str):
        raise ForestFormatError(
            "file", f"invalid UBJSON at byte {self.pos}: {message}. The file may be truncated; re-export the model."
        )

    def take(self, k: int) -> bytes:
        if k < 0 or self.pos + k > self.end:
            self.fail("unexpected end of data")
        chunk = self.data[self.pos : self.pos + k]
        self.pos += k
        return chunk

    def peek(self, marker: bytes) -> bool:
        return self.data[self.pos : self.pos + 1] == marker

    def marker(self) -> bytes:
        while True:
            marker = self.take(1)
            if marker != b"N":  # no-op
                return marker

    def number(self, marker: bytes):
        dtype, size = _NUMBERS[marker]
        value = np.frombuffer(self.take(size), dtype=dtype)[0]
        return float(value) if dtype[1] == "f" else int(value)

    def length(self) -> int:
        marker = self.marker()
        if marker not in _INTEGER_MARKERS:
            self.fail(f"expected an integer length, got marker {marker!r}")
        k = self.number(marker)
        if k < 0:
            self.fail("negative length")
        return k

    def string(self) -> str:
        k = self.length()
        try:
            return self.take(k).decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string is not UTF-8")

    def value(self, marker: bytes, depth: int):
        if marker in _NUMBERS:
            return self.number(marker)
        if marker == b"S":
            return self.string()
        if marker == b"H":
            text = self.string()
            try:
                return float(text) if any(c in text for c in ".eE") else int(text)
            except ValueError:
                self.fail("bad high-precision number")
        if marker == b"C":
            return self.take(1).decode("latin-1")
        if marker == b"T":
            return True
        if marker == b"F":
            return False
        if marker == b"Z":
            return None
        if marker == b"[":
            return self.array(depth + 1)
        if marker == b"{":
            return self.object(depth + 1)
        self.fail(f"unknown marker {marker!r}")

    def container_header(self, depth: int) -> tuple[bytes | None, int | None]:
        """(element type, count) of an optimized container; None where not given."""
        if depth > MAX_NESTING:
            self.fail("nested too deeply")
        element_type = count = None
        if self.peek(b"$"):
            self.pos += 1
            element_type = self.take(1)
            if self.take(1) != b"#":
                self.fail("typed container without a count")
            count = self.length()
        elif self.peek(b"#"):
            self.pos += 1
            count = self.length()
        if count is not None and count > self.end - self.pos and element_type not in (b"T", b"F", b"Z"):
            self.fail(f"container count {count} exceeds the data left")
        return element_type, count

    def array(self, depth: int):
        element_type, count = self.container_header(depth)
        if element_type in _NUMBERS:
            dtype, size = _NUMBERS[element_type]
            raw = self.take(count * size)
            return np.frombuffer(raw, dtype=dtype).astype(np.float64 if dtype[1] == "f" else np.int64)
        if element_type is not None:
            if count > _MAX_UNTYPED_ITEMS:
                self.fail("container too large")
            return [self.value(element_type, depth) for _ in range(count)]
        if count is not None:
            return [self.value(self.marker(), depth) for _ in range(count)]
        items = []
        while True:
            marker = self.marker()
            if marker == b"]":
                return items
            items.append(self.value(marker, depth))

    def object(self, depth: int):
        element_type, count = self.container_header(depth)
        items = {}
        if count is not None:
            for _ in range(count):
                key = self.string()
                items[key] = self.value(element_type if element_type is not None else self.marker(), depth)
            return items
        while True:
            if self.peek(b"}"):
                self.pos += 1
                return items
            if self.peek(b"N"):
                self.pos += 1
                continue
            key = self.string()
            items[key] = self.value(self.marker(), depth)
