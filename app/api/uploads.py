"""Request bodies received as a stream, counted against the upload limit (413 past it).

Accepts a raw body (its Content-Type tells the format) or multipart/form-data with one file part
and optional small text fields.
"""

from dataclasses import dataclass, field

from python_multipart.multipart import Field, File, create_form_parser
from starlette.requests import Request

from app.api.problems import ProblemError
from app.core.errors import FieldFault, Invalid, TooLarge


@dataclass
class Upload:
    data: bytes
    content_type: str
    filename: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


def _too_large(limit: int) -> TooLarge:
    return TooLarge(
        f"The upload is larger than the limit of {limit} bytes.",
        [FieldFault("file", "too large", "send a smaller file or raise FIRE_MAX_UPLOAD_BYTES")],
    )


async def receive_upload(request: Request, limit: int) -> Upload:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    content_type = request.headers.get("content-type", "application/octet-stream")
    if content_type.startswith("multipart/form-data"):
        return await _receive_multipart(request, content_type, limit)
    chunks, received = [], 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return Upload(b"".join(chunks), content_type.split(";")[0].strip().lower())


async def _receive_multipart(request: Request, content_type: str, limit: int) -> Upload:
    fields: dict[str, str] = {}
    files: list[File] = []
    received = 0

    def on_field(part: Field) -> None:
        # only a query string's fields may lack a name: the multipart parser refuses a part without one
        assert part.field_name is not None
        fields[part.field_name.decode(errors="replace")] = (part.value or b"").decode(errors="replace")

    try:
        parser = create_form_parser(
            {"Content-Type": content_type.encode("latin-1")},
            on_field=on_field,
            on_file=files.append,
            config={"MAX_MEMORY_FILE_SIZE": limit + 1},
        )
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit:
                raise _too_large(limit)
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
    upload = files[0]
    upload.file_object.seek(0)
    filename = upload.file_name.decode(errors="replace") if upload.file_name else None
    part_type = getattr(upload, "content_type", None) or "application/octet-stream"
    return Upload(upload.file_object.read(), part_type.split(";")[0].strip().lower(), filename, fields)
