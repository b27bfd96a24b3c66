"""Uploaded files received as a stream into a spooled file (in memory up to SPOOL_MEMORY_BYTES, then on this
process's own disk), counted against the route's limit as they arrive (413 past it, also without Content-Length):
an upload is never held whole in memory here. The one receiver of every upload route (datasets, forests, batch).

The body is the file itself (its Content-Type tells the format) or multipart/form-data with one file part named
``file`` and optional small text fields. Its Content-Encoding is ``identity`` or ``gzip``: a gzipped file is read as
it is, and its route says what it does with it (datasets and forests inflate it, bounded as it inflates; batch
refuses it); any other coding is a 415.
"""

import tempfile
from dataclasses import dataclass, field
from typing import IO

from python_multipart.multipart import Field, File, create_form_parser
from starlette.requests import Request

from app.api.problems import ProblemError
from app.core.errors import FieldFault, Invalid, TooLarge

SPOOL_MEMORY_BYTES = 1024 * 1024  # an upload larger than this goes to disk as it arrives
READ_CODINGS = ("identity", "gzip")  # the Content-Encodings an upload may declare: the file's bytes as sent


@dataclass
class ReceivedFile:
    """The file of an upload (closed with the ReceivedFile: a spooled file on disk is removed then), its media
    type, its name (multipart) and the other fields of a multipart form."""

    file: IO[bytes]
    content_type: str
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)

    def head(self, size: int) -> bytes:
        """The file's first ``size`` bytes (the file left at its start)."""
        self.file.seek(0)
        head = self.file.read(size)
        self.file.seek(0)
        return head

    def read(self) -> bytes:
        self.file.seek(0)
        return self.file.read()

    def close(self) -> None:
        self.file.close()

    def __enter__(self) -> "ReceivedFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def too_large(limit: int, setting: str) -> TooLarge:
    return TooLarge(
        f"The file is larger than the limit of {limit} bytes.",
        [FieldFault("file", "too large", f"send a smaller file (split it) or raise {setting}")],
    )


def check_content_encoding(request: Request) -> None:
    """A 415 unless the body's Content-Encoding is one READ_CODINGS names (none is identity)."""
    coding = request.headers.get("content-encoding", "identity").strip().lower()
    if coding not in READ_CODINGS:
        raise ProblemError(
            415,
            f"Content-Encoding '{coding}' is not read.",
            [
                FieldFault(
                    "header.Content-Encoding",
                    f"'{coding}' is not read",
                    "send the file as it is (identity), or gzipped (Content-Encoding: gzip)",
                )
            ],
        )


async def receive_file(request: Request, limit: int, setting: str) -> ReceivedFile:
    """The request's file, spooled as it arrives and counted against ``limit`` bytes (``setting`` raises it)."""
    check_content_encoding(request)
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large(limit, setting)
    content_type = request.headers.get("content-type", "application/octet-stream")
    if content_type.startswith("multipart/form-data"):
        return await _receive_multipart(request, content_type, limit, setting)
    spooled = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 (ReceivedFile closes it)
    try:
        received = 0
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise too_large(limit, setting)
            spooled.write(chunk)
    except BaseException:
        spooled.close()
        raise
    spooled.seek(0)
    return ReceivedFile(spooled, _media_type(content_type))


async def _receive_multipart(request: Request, content_type: str, limit: int, setting: str) -> ReceivedFile:
    fields: dict[str, str] = {}
    files: list[File] = []

    def on_field(part: Field) -> None:
        # only a query string's fields may lack a name: the multipart parser refuses a part without one
        assert part.field_name is not None
        fields[part.field_name.decode(errors="replace")] = (part.value or b"").decode(errors="replace")

    try:
        try:
            parser = create_form_parser(
                {"Content-Type": content_type.encode("latin-1")},
                on_field=on_field,
                on_file=files.append,
                config={"MAX_MEMORY_FILE_SIZE": SPOOL_MEMORY_BYTES},
            )
            received = 0
            async for chunk in request.stream():
                received += len(chunk)
                if received > limit:
                    raise too_large(limit, setting)
                parser.write(chunk)
            parser.finalize()
        except TooLarge:
            raise
        except Exception as exc:
            raise ProblemError(
                400,
                f"The multipart body could not be parsed: {exc}",
                [
                    FieldFault(
                        "body",
                        "malformed multipart",
                        "send multipart/form-data with its boundary and one file part named 'file'",
                    )
                ],
            ) from exc
        if len(files) != 1:
            raise Invalid(
                f"Expected exactly one file part, got {len(files)}.",
                [FieldFault("file", "one file part required", "attach the file as form field 'file'")],
            )
    except BaseException:
        for part in files:
            part.close()
        raise
    part = files[0]
    part.file_object.seek(0)
    filename = part.file_name.decode(errors="replace") if part.file_name else None
    return ReceivedFile(
        part.file_object, _media_type(part.content_type or "application/octet-stream"), filename, fields
    )


def _media_type(content_type: str) -> str:
    return content_type.split(";")[0].strip().lower()
