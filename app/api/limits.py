"""The size limit of request bodies that are not uploads: Content-Length is checked first, and a body without
one (chunked) is counted as it arrives, so that no body larger than its limit is ever held in memory. The body
is read here, up to its limit, and handed on to the route as it came. Such a body is read as it is sent: one that
declares a Content-Encoding (gzip, say) is a 415 before any of it is read (uploads: ``app.api.uploads``)."""

from collections.abc import Callable

from starlette.requests import Request

from app.api.problems import problem_response
from app.core.errors import FieldFault


class BodyLimitMiddleware:
    """``limit_for(method, path)``: the byte limit of that request's body, or None where the route counts it
    itself (uploads)."""

    def __init__(self, app, limit_for: Callable[[str, str], int | None]):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send):
        limit = self.limit_for(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if limit is None:
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        coding = headers.get(b"content-encoding", b"identity").strip().lower()
        if coding != b"identity":
            await self._refuse_coding(scope, receive, send, coding.decode("latin-1"))
            return
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await self._refuse(scope, receive, send, limit)
            return
        messages, received = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break  # the client went away: the route sees it as it would have
            received += len(message.get("body", b""))
            if received > limit:
                await self._refuse(scope, receive, send, limit)
                return
            if not message.get("more_body", False):
                break

        async def replay():
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(scope, receive, send, limit: int) -> None:
        response = problem_response(
            Request(scope),
            413,
            f"The request body is larger than the limit of {limit} bytes.",
            [FieldFault("body", "too large", "send a smaller body (split rows over several requests)")],
        )
        await response(scope, receive, send)

    @staticmethod
    async def _refuse_coding(scope, receive, send, coding: str) -> None:
        response = problem_response(
            Request(scope),
            415,
            f"Content-Encoding '{coding}' is not read here: this body is read as it is sent.",
            [FieldFault("header.Content-Encoding", f"'{coding}' is not read", "send the body uncompressed")],
        )
        await response(scope, receive, send)
