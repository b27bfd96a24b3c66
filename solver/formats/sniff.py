"""What an upload is, read from its bytes: compression (gzip is unpacked, bounded), pickles
(recognized, never loaded), zip archives (skops), UBJSON (XGBoost) and the JSON formats.

Gzip is inflated by :func:`gunzip_chunks`, at most INFLATE_STEP bytes at a time, and refused as soon as the bytes
inflated pass the limit: a gzip bomb costs the time to inflate up to the limit and never more memory than one step.
A service can inflate its uploads with the same bound (fire-rules' does, for its tables)."""

import bz2
import io
import json
import lzma
import zipfile
import zlib
from collections.abc import Iterator
from typing import IO, Any

from .errors import ForestFormatError

GZIP_MAGIC = b"\x1f\x8b"
INFLATE_STEP = 1 << 20  # compressed bytes read, and inflated bytes produced, per step of gunzip_chunks


class InflatedTooLarge(ValueError):
    """A gzip stream that inflates to more than ``limit`` bytes (found while inflating, before more is)."""

    def __init__(self, limit: int):
        super().__init__(f"the gzip content inflates to more than the limit of {limit} bytes")
        self.limit = limit


class CorruptGzip(ValueError):
    """A gzip stream that cannot be inflated (a bad header or checksum, or cut short)."""


FIX_HINT = (
    "Upload one of: a skops file (skops.io.dump), an XGBoost JSON/UBJSON model "
    "(Booster.save_model('model.json')), a LightGBM dump_model() JSON "
    "(json.dump(booster.dump_model(), f)) or a fire-forest JSON (TreeEnsemble.to_dict())."
)
_COMPRESSION_MAGIC = (
    (GZIP_MAGIC, "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x5d\x00\x00", "lzma"),
    (b"\x04\x22\x4d\x18", "lz4"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
    (b"ZF", "joblib-zlib"),
)  # joblib's legacy zlib container
_PICKLE_EXTENSIONS = (".pkl", ".pickle", ".joblib", ".sav", ".dill", ".pt", ".pth", ".cpkl")


def as_bytes(data: Any) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise ForestFormatError("file", f"expected the file content as bytes, got {type(data).__name__}")


def pickle_refused(what: str = "a pickle") -> ForestFormatError:
    return ForestFormatError(
        "file",
        f"the file is {what}. Pickle and joblib files are never loaded here, because "
        f"unpickling runs arbitrary code. {FIX_HINT}",
        "unsupported",
    )


def parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise ForestFormatError(
            "file",
            f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}. The file may be "
            "truncated or not be JSON; re-export the model.",
        ) from None
    except UnicodeDecodeError as e:
        raise ForestFormatError("file", f"the JSON file is not valid UTF-8/16/32 text: {e.reason}.") from None
    except RecursionError:
        raise ForestFormatError("file", "the JSON document is nested too deeply.") from None
    except ValueError as e:  # e.g. integer literal too long
        raise ForestFormatError("file", f"invalid JSON: {e}.") from None


def sniff(data: bytes, filename: str | None, max_bytes: int, _unpacked: bool = False) -> tuple[str | None, Any]:
    """(format, payload) of an upload.

    format: one of the formats loaders read, ``"pickle"``, or None when not recognized. payload: the
    parsed JSON document, the bytes of a UBJSON or skops file, or, for a pickle or content we do not
    accept, the ForestFormatError that says why. A gzip file is sniffed by its content (decompressed
    up to ``max_bytes``; a corrupt or oversized one raises).
    """
    if not data:
        return None, ForestFormatError("file", "the file is empty.")
    if _is_pickle(data):
        return "pickle", pickle_refused()
    compression = _compression(data)
    if compression == "gzip" and not _unpacked:
        return sniff(_gunzip(data, max_bytes), filename, max_bytes, _unpacked=True)
    if compression is not None and compression != "gzip":
        head = _peek_decompressed(data, compression)
        if (head and _is_pickle(head)) or compression == "joblib-zlib":
            return "pickle", pickle_refused(f"a {compression}-compressed pickle (joblib)")
        if _extension(filename) in _PICKLE_EXTENSIONS:
            return "pickle", pickle_refused(f"a {compression}-compressed file named like a pickle")
        return None, ForestFormatError(
            "file",
            f"{compression}-compressed uploads are not supported; upload the file "
            f"uncompressed or gzip-compressed. {FIX_HINT}",
            "unsupported",
        )
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        names = _zip_names(data)
        if names is None:
            return None, ForestFormatError(
                "file", "the file looks like a zip archive but cannot be read; it may be truncated."
            )
        if "schema.json" in names:
            return "skops", data
        if any(n.endswith((".pkl", ".pickle")) for n in names):
            return "pickle", pickle_refused("a zip archive holding a pickle (e.g. torch.save)")
        return None, ForestFormatError(
            "file", f"a zip archive that is not a skops file (no schema.json). {FIX_HINT}", "unsupported"
        )
    if _is_ubjson(data):
        return "xgboost-ubjson", data
    if _first_char(data) in (b"{", b"["):
        try:
            document = parse_json(data)
        except ForestFormatError as e:
            return None, e
        kind = _json_kind(document)
        if kind is None:
            return None, ForestFormatError(
                "file",
                "a JSON document that is not a model format we know (expected an object "
                "with 'format': 'fire-forest', an XGBoost model with 'learner', or a LightGBM "
                f"dump_model() with 'tree_info'). {FIX_HINT}",
                "unsupported",
            )
        return kind, document
    if _extension(filename) in _PICKLE_EXTENSIONS:
        return "pickle", pickle_refused("named like a pickle and is not a supported format")
    if data.startswith(b"tree\n"):
        return None, ForestFormatError(
            "file",
            "this is LightGBM's text model format, which is not accepted (its native loader "
            "is not safe on untrusted input). Upload json.dumps(booster.dump_model()) instead.",
            "unsupported",
        )
    return None, ForestFormatError("file", f"unrecognized file format. {FIX_HINT}", "unsupported")


def _first_char(data: bytes) -> bytes:
    text = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    return text.lstrip(b" \t\r\n")[:1]


def _is_pickle(data: bytes) -> bool:
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return True
    # protocol 0/1 pickles: start with MARK/GLOBAL/EMPTY_* ... and end with STOP '.'
    if data[:1] in (b"(", b"c", b"]", b"}", b")", b"N", b"I", b"F", b"S", b"V", b"l", b"d", b"q"):
        tail = data.rstrip(b"\r\n")
        if tail.endswith(b".") and not data.lstrip().startswith((b"{", b"[")):
            return True
    return False


def _is_ubjson(data: bytes) -> bool:
    return len(data) >= 2 and data[:1] == b"{" and data[1:2] in (b"i", b"U", b"I", b"l", b"L", b"$", b"#", b"}")


def _compression(data: bytes) -> str | None:
    for magic, name in _COMPRESSION_MAGIC:
        if data.startswith(magic):
            return name
    if len(data) >= 2 and data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] * 256 + data[1]) % 31 == 0:
        return "zlib"
    return None


def _peek_decompressed(data: bytes, compression: str, n: int = 64) -> bytes:
    try:
        if compression == "zlib":
            return zlib.decompressobj().decompress(data[:4096], n)
        if compression == "bz2":
            return bz2.BZ2Decompressor().decompress(data[:65536], n)
        if compression in ("xz", "lzma"):
            return lzma.LZMADecompressor().decompress(data[:65536], n)
    except Exception:
        return b""
    return b""


def gunzip_chunks(source: IO[bytes], max_bytes: int) -> Iterator[bytes]:
    """The inflated bytes of every member of the gzip stream ``source`` (concatenated members are one file), at most
    INFLATE_STEP at a time. Raises InflatedTooLarge as soon as they pass ``max_bytes``, CorruptGzip where the stream
    is not gzip or ends inside a member."""
    inflated = 0
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending, in_member = b"", False
    while True:
        if not pending:
            pending = source.read(INFLATE_STEP)
            if not pending:
                break
        try:
            out = decompressor.decompress(pending, INFLATE_STEP)
        except zlib.error as e:
            raise CorruptGzip(str(e)) from None
        in_member = True
        inflated += len(out)
        if inflated > max_bytes:
            raise InflatedTooLarge(max_bytes)
        if out:
            yield out
        if decompressor.eof:  # the next member, if any, starts in what this one left unused
            pending, in_member = decompressor.unused_data, False
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        else:
            pending = decompressor.unconsumed_tail
    if in_member:
        raise CorruptGzip("the gzip stream ends inside a member (the file is cut short)")


def gunzip(data: bytes, max_bytes: int) -> bytes:
    """The inflated bytes of a gzip file: counted first, keeping none of them (a bomb is refused with no more memory
    than a step), then inflated into one buffer of that size."""
    size = sum(len(chunk) for chunk in gunzip_chunks(io.BytesIO(data), max_bytes))
    out = io.BytesIO()
    for chunk in gunzip_chunks(io.BytesIO(data), size):
        out.write(chunk)
    return out.getvalue()


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    try:
        return gunzip(data, max_bytes)
    except CorruptGzip as e:
        raise ForestFormatError(
            "file", f"corrupt gzip data: {e}. Re-compress the file or upload it uncompressed."
        ) from None
    except InflatedTooLarge:
        raise ForestFormatError(
            "file", f"the gzip content expands beyond the limit of {max_bytes} bytes.", "too_large"
        ) from None


def _zip_names(data: bytes) -> list[str] | None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return z.namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return None


def _json_kind(document: Any) -> str | None:
    if not isinstance(document, dict):
        return None
    if document.get("format") == "fire-forest":
        return "fire-json"
    if isinstance(document.get("learner"), dict):
        return "xgboost-json"
    if "tree_info" in document and (document.get("name") == "tree" or "max_feature_idx" in document):
        return "lightgbm-json"
    return None


def _extension(filename: str | None) -> str:
    if not filename:
        return ""
    name = filename.lower().rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
    for suffix in (".gz", ".gzip"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return "." + name.rsplit(".", 1)[-1] if "." in name else ""
