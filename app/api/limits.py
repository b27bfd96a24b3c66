"""The size limit of request bodies that are not uploads: counted as they arrive (Content-Length is checked
first, but a chunked body has none), so that no body larger than its limit is ever held in memory."""
from collections.abc import Callable

from app.core.errors import FieldFault, TooLarge


class BodyLimitMiddleware:
    """``limit_for(method, path)``: the byte limit of that request's body, or None where the route counts it
    itself (uploads)."""

    def __init__(self, app, limit_for: Callable[[str, str], int | None]):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["method"], scope["path"])
        if limit is None:
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            receive = _refusing(limit)
        else:
            receive = _counting(receive, limit)
        await self.app(scope, receive, send)


def too_large(limit: int) -> TooLarge:
    return TooLarge(f"The request body is larger than the limit of {limit} bytes.",
                    [FieldFault("body", "too large", "send a smaller body (split rows over several requests)")])


def _refusing(limit: int):
    async def receive():
        raise too_large(limit)
    return receive


def _counting(receive, limit: int):
    received = 0

    async def counted():
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                raise too_large(limit)
        return message
    return counted
