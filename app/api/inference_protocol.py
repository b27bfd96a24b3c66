"""The Open Inference Protocol's wire encoding (KServe V2: the HTTP protocol of Triton, Seldon MLServer and KServe),
as ``app/api/routes/inference.py`` speaks it: its request and response documents, the inputs read into a table,
the scores written as outputs.

- Inputs: one tensor per column of the training table, named as the column, shape ``[-1]`` (one element per row;
  ``[n, 1]`` is read as ``[n]``): FP64 for a numeric column (FP32, INT64 and INT32 too; NaN is a missing value;
  never BOOL; a JSON number read correctly rounded, as every entrance reads numbers: ``app.core.tables``), BYTES
  for a categorical one (UTF-8; an empty element is a missing value).
- Outputs: ``predictions``, shape ``[-1]``: FP64 predictions (rates for counts), or a classifier's labels in their
  own type (BYTES for text, INT64, FP64 or BOOL where the table gave the labels as such); a classifier's
  ``probabilities``, FP64, shape ``[-1, K]``: a column per class in the order of the model's classes (two for a
  binary classifier), listed in the output's metadata ``parameters.classes`` (a JSON array).
- Triton's binary tensor data extension (tritonclient's default): inputs after the JSON, outputs so where asked.
- A request the protocol cannot read (its JSON, an input's name, datatype, shape or data) is a 400.
"""

import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from fastapi import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.api.problems import ProblemError, problem_responses, validation_faults
from app.core.errors import FieldFault
from app.core.model_scoring import Scores, ScoringModel
from solver.encoding import TableEncoding

HEADER_LENGTH = "Inference-Header-Content-Length"  # the JSON part's bytes; binary tensor data follow it
COLUMN_TYPES = {"numeric": "FP64", "categorical": "BYTES"}  # an input's datatype in the metadata
NUMBER_TYPES = {"FP64": "<f8", "FP32": "<f4", "INT64": "<i8", "INT32": "<i4"}  # accepted for a numeric column
JSON_ELEMENTS: dict[str, tuple[type, ...]] = {
    "FP64": (int, float),
    "FP32": (int, float),
    "INT64": (int,),
    "INT32": (int,),
    "BYTES": (str,),
}
OUTPUT_TYPES = {"FP64": "<f8", "INT64": "<i8", "BOOL": "?"}  # BYTES outputs are length-prefixed


class Live(BaseModel):
    live: bool = True


class Ready(BaseModel):
    ready: bool = True


class ModelReady(Ready):
    name: str


class ServerMetadata(BaseModel):
    name: str
    version: str
    extensions: list[str]


class TensorMetadata(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, str] | None = None


class ModelMetadata(BaseModel):
    name: str
    versions: list[str] = Field(description="the name's version numbers, newest first")
    platform: str
    inputs: list[TensorMetadata] = Field(description="one per column of the training table")
    outputs: list[TensorMetadata]


class StrictRequest(BaseModel):
    """A part of a request: strict, as every body of this API (``"3"`` is no integer, ``3.0`` no shape)."""

    model_config = ConfigDict(strict=True)


class RequestInput(StrictRequest):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Any] = {}
    data: list | None = Field(None, description="the elements, row-major (flat or nested); none: binary data")


class RequestOutput(StrictRequest):
    name: str
    parameters: dict[str, Any] = {}


class InferenceRequest(StrictRequest):
    id: str | None = None
    parameters: dict[str, Any] = Field({}, description="binary_data_output: the outputs' default; others ignored")
    inputs: list[RequestInput]
    outputs: list[RequestOutput] | None = Field(None, description="which outputs to answer (none: all)")


class ResponseOutput(BaseModel):
    name: str
    datatype: str
    shape: list[int]
    parameters: dict[str, Any] | None = None
    data: list | None = None


class InferenceResponse(BaseModel):
    model_name: str
    model_version: str = Field(description="the version that answered")
    id: str | None = None
    outputs: list[ResponseOutput]


def parse_request(body: bytes, header_length: str | None) -> tuple[InferenceRequest, bytes]:
    """The request (the body's JSON part: all of it, or the first ``header_length`` bytes) and the binary data
    after it."""
    split = len(body) if header_length is None else int(header_length) if header_length.isdigit() else -1
    if not 0 <= split <= len(body):
        raise ProblemError(
            400,
            f"The {HEADER_LENGTH} header is not the length of the body's JSON part.",
            [
                FieldFault(
                    f"header.{HEADER_LENGTH}",
                    f"'{header_length}' for a body of {len(body)} bytes",
                    "send the byte length of the JSON that starts the body",
                )
            ],
        )
    try:
        request = InferenceRequest.model_validate_json(body[:split])
    except ValidationError as error:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in error.errors()]
        raise ProblemError(400, "The inference request does not validate.", validation_faults(errors)) from error
    return request, body[split:]


class InputFault(Exception):
    """An input the protocol cannot read: ``(message, fix)``."""


def read_inputs(
    request: InferenceRequest, binary: bytes, encoding: TableEncoding, row_columns: Sequence[str] = ()
) -> tuple[dict[str, Any], int]:
    """Each column's values (numbers as float64, text as str or None) and the number of rows; a 400 naming every
    input at fault, and every column no input gives. ``row_columns``: the model's exposure and offset columns
    (``ScoringModel.row_columns``), numeric inputs a request may give."""
    kinds = {column.name: column.kind for column in encoding.columns}
    optional = {name: "numeric" for name in row_columns if name not in kinds}
    table: dict[str, Any] = {}
    faults, seen, offset = [], set(), 0
    for tensor in request.inputs:
        field = f"body.inputs.{tensor.name}"
        size = tensor.parameters.get("binary_data_size")
        try:
            if size is not None and (type(size) is not int or size < 0):
                raise InputFault(f"binary_data_size {size!r}", "send the byte length of its binary data")
            chunk = None if size is None else binary[offset : offset + size]
            offset += size or 0
            if tensor.name not in kinds and tensor.name not in optional:
                raise InputFault(
                    "no such input", f"remove it; the inputs are the model's columns {[*kinds, *optional]}"
                )
            if tensor.name in seen:
                raise InputFault("given twice", "send each input once")
            seen.add(tensor.name)
            table[tensor.name] = _values(tensor, chunk, kinds.get(tensor.name) or optional[tensor.name])
        except InputFault as fault:
            faults.append(FieldFault(field, *fault.args))
    faults += [
        FieldFault(f"body.inputs.{name}", "missing input", f"send an input per column of the training table ({kind})")
        for name, kind in kinds.items()
        if name not in seen
    ]
    if offset != len(binary):
        faults.append(
            FieldFault(
                "body",
                f"{len(binary)} bytes of binary data for inputs whose binary_data_size add up to {offset}",
                "send each binary input's bytes after the JSON, in the order of the inputs",
            )
        )
    rows = {name: len(values) for name, values in table.items()}
    if len(set(rows.values())) > 1:
        faults.append(FieldFault("body.inputs", f"rows per input: {rows}", "send as many rows in every input"))
    if faults:
        raise ProblemError(400, "The inputs are not the model's columns as the protocol sends them.", faults)
    return table, next(iter(rows.values()), 0)


def _values(tensor: RequestInput, chunk: bytes | None, kind: str) -> np.ndarray | list:
    accepted = list(NUMBER_TYPES) if kind == "numeric" else ["BYTES"]
    if tensor.datatype not in accepted:
        what = "numbers (1 and 0 for true and false)" if kind == "numeric" else "the categories' text"
        raise InputFault(f"datatype {tensor.datatype} for a {kind} column", f"send {' or '.join(accepted)}: {what}")
    shape = tensor.shape
    if len(shape) not in (1, 2) or shape[1:] not in ([], [1]) or shape[0] < 0:
        raise InputFault(f"shape {shape}", "send shape [n] (or [n, 1]): one element per row")
    values = _json_elements(tensor) if chunk is None else _binary_elements(tensor.datatype, chunk)
    if len(values) != shape[0]:
        raise InputFault(f"{len(values)} elements for shape {shape}", "send as many elements as the shape says")
    if kind == "numeric":
        return np.asarray(values, dtype=np.float64)
    return [value or None for value in values]  # an empty category is a missing value


def _json_elements(tensor: RequestInput) -> list:
    if tensor.data is None:
        raise InputFault("no data", "send data, or parameters.binary_data_size and the bytes after the JSON")
    values = np.asarray(tensor.data, dtype=object).ravel().tolist()  # flat or nested, row-major
    allowed = JSON_ELEMENTS[tensor.datatype]
    wrong = [value for value in values if type(value) not in allowed]
    if wrong:
        what = "strings ('' for a missing value)" if tensor.datatype == "BYTES" else "numbers (NaN for a missing value)"
        raise InputFault(f"{len(wrong)} elements that are not {tensor.datatype}, as {wrong[0]!r}", f"send {what}")
    return values


def _binary_elements(datatype: str, chunk: bytes) -> np.ndarray | list:
    """Little-endian numbers, or BYTES elements each after its 4-byte little-endian length."""
    try:
        if datatype != "BYTES":
            return np.frombuffer(chunk, NUMBER_TYPES[datatype])
        values, offset = [], 0
        while offset < len(chunk):
            end = offset + 4 + struct.unpack_from("<I", chunk, offset)[0]
            if end > len(chunk):
                raise ValueError("an element runs past the data")
            values.append(chunk[offset + 4 : end].decode())
            offset = end
        return values
    except (ValueError, struct.error) as error:  # UnicodeDecodeError is a ValueError
        raise InputFault(
            f"unreadable binary {datatype} data ({error})",
            "send little-endian numbers, or for BYTES each element's 4-byte little-endian length then its UTF-8 bytes",
        ) from error


def requested_outputs(request: InferenceRequest, scoring: ScoringModel) -> dict[str, bool]:
    """The outputs to answer, each whether in binary (its ``binary_data``, else the request's
    ``binary_data_output``)."""
    names = ["predictions"] if scoring.classes is None else ["predictions", "probabilities"]
    if survival_times(request) is not None:
        names.append("survival")
    default = request.parameters.get("binary_data_output") is True
    if request.outputs is None:
        return dict.fromkeys(names, default)
    unknown = [output.name for output in request.outputs if output.name not in names]
    if unknown:
        raise ProblemError(
            400,
            "The request asks for outputs this model does not have.",
            [FieldFault(f"body.outputs.{name}", "no such output", f"ask for {' or '.join(names)}") for name in unknown],
        )
    return {output.name: output.parameters.get("binary_data", default) is True for output in request.outputs}


def survival_times(request: InferenceRequest) -> list[float] | None:
    """``parameters.times`` of a request to a survival model (Cox loss): a JSON array of times >= 0, or a string of
    one (a parameter's value is a string, a number or a boolean); each row's S(t | x) at them is the output
    ``survival`` (FP64, rows x len(times))."""
    times = request.parameters.get("times")
    if times is None:
        return None
    try:
        values = json.loads(times) if isinstance(times, str) else times
        values = [float(t) for t in (values if isinstance(values, list) else [values])]
    except (TypeError, ValueError) as error:
        raise ProblemError(
            400,
            "parameters.times is a list of times.",
            [FieldFault("body.parameters.times", str(error), "send times >= 0 as a JSON array, such as [30, 365]")],
        ) from error
    return values


def prediction_datatype(classes: list | None) -> str:
    """FP64 for numbers and rates; a classifier's labels in their own type (BYTES for text, or labels of mixed
    types)."""
    if classes is None:
        return "FP64"
    kinds = {type(label) for label in classes}
    return {bool: "BOOL", int: "INT64", float: "FP64"}.get(kinds.pop(), "BYTES") if len(kinds) == 1 else "BYTES"


def output_metadata(classes: list | None) -> list[TensorMetadata]:
    outputs = [TensorMetadata(name="predictions", datatype=prediction_datatype(classes), shape=[-1])]
    if classes is not None:
        columns = {"classes": json.dumps(classes)}  # a parameter is a string, a number or a boolean
        outputs.append(
            TensorMetadata(name="probabilities", datatype="FP64", shape=[-1, len(classes)], parameters=columns)
        )
    return outputs


def answer(scores: Scores, scoring: ScoringModel, request_id: str | None, outputs: dict[str, bool]) -> Response:
    """The outputs asked for as JSON; where any is binary, its bytes follow the JSON (HEADER_LENGTH long)."""
    n_rows = len(scores.predictions)
    datatype = prediction_datatype(scoring.classes)
    predictions = [str(label) for label in scores.predictions] if datatype == "BYTES" else scores.predictions
    tensors = {"predictions": (datatype, [n_rows], predictions)}
    if "probabilities" in outputs:  # a binary classifier's scores hold P(classes[1])
        rows = [[1.0 - p, p] if isinstance(p, float) else p for p in scores.probabilities or ()]
        flat = np.asarray(rows, dtype=np.float64).ravel().tolist()
        tensors["probabilities"] = ("FP64", [n_rows, len(scores.classes or ())], flat)
    if "survival" in outputs and scores.survival is not None:
        flat = np.asarray(scores.survival, dtype=np.float64).ravel().tolist()
        tensors["survival"] = ("FP64", [n_rows, len(scores.times or ())], flat)
    described, chunks = [], []
    for name, binary in outputs.items():
        tensor_type, shape, data = tensors[name]
        output: dict[str, Any] = {"name": name, "datatype": tensor_type, "shape": shape}
        if binary:
            chunks.append(_serialized(tensor_type, data))
            output["parameters"] = {"binary_data_size": len(chunks[-1])}
        else:
            output["data"] = data
        described.append(output)
    identity = {"model_name": scoring.name, "model_version": str(scoring.version)}
    # allow_nan=False: never a body JSON cannot read (score_rows refuses a row whose answer is not finite)
    document = {**identity, **({} if request_id is None else {"id": request_id}), "outputs": described}
    header = json.dumps(document, allow_nan=False)
    if not chunks:
        return Response(header, media_type="application/json")
    content = header.encode() + b"".join(chunks)
    return Response(content, media_type="application/octet-stream", headers={HEADER_LENGTH: str(len(header.encode()))})


def _serialized(datatype: str, data: list) -> bytes:
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(value)) + value for value in (str(v).encode() for v in data))
    return np.asarray(data, dtype=OUTPUT_TYPES[datatype]).tobytes()


def _inlined(schema: dict) -> dict:
    """A pydantic JSON schema with its definitions in place of their references (a request body documented by
    hand cannot reference definitions of its own)."""
    definitions = schema.pop("$defs", {})

    def place(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return place(definitions[node["$ref"].rsplit("/", 1)[1]])
            return {key: place(value) for key, value in node.items()}
        return [place(item) for item in node] if isinstance(node, list) else node

    return place(schema)


INFER_BODY = {
    "requestBody": {
        "required": True,
        "description": f"The request as JSON, or its JSON (its length in the {HEADER_LENGTH} header) followed by the "
        "binary data of the inputs that give parameters.binary_data_size, in their order",
        "content": {"application/json": {"schema": _inlined(InferenceRequest.model_json_schema())}},
    }
}
INFER_RESPONSES = {
    200: {
        "model": InferenceResponse,
        "description": "The outputs; where any is asked for in binary, application/octet-stream: the JSON "
        f"({HEADER_LENGTH} bytes), then the binary outputs' bytes in their order",
        "headers": {
            HEADER_LENGTH: {
                "description": "the JSON part's length, where binary data follow",
                "schema": {"type": "integer"},
            }
        },
        "content": {
            "application/json": {},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    },
    **problem_responses(400, 404, 413, 422),
}
