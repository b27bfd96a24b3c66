"""Redis replies read as the types they have here.

The service's clients (app/core/connections.py) leave responses undecoded, so every string reply is ``bytes``.
redis-py types its replies for decoding clients as well (``bytes | str``), and a sorted-set range for a read with
scores as well as one without; these helpers state which of those a reply is, in one place.
"""

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # redis-py's reply types (redis.typing) are not all in every supported redis version
    from redis.typing import ZSetRangeResponse


def text(reply: bytes | str) -> str:
    """A string reply (a key, a member, a field name) as text."""
    return cast(bytes, reply).decode()


def members(reply: "ZSetRangeResponse") -> list[str]:
    """A sorted-set range read without scores: its members, as text."""
    return [text(member) for member in cast("list[bytes]", reply)]


def scored_members(reply: "ZSetRangeResponse") -> list[tuple[str, float]]:
    """A sorted-set range read ``withscores``: (member as text, score) pairs."""
    return [(text(member), score) for member, score in cast("list[tuple[bytes, float]]", reply)]


def values(reply: list[bytes | str | None]) -> list[bytes | None]:
    """A multi-key or multi-field read (MGET, HMGET): each value as stored, None where there is none."""
    return cast("list[bytes | None]", reply)
