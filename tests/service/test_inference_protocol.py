"""The Open Inference Protocol (KServe V2) as tritonclient.http speaks it, against the API served by uvicorn: health,
server and model metadata, readiness, and inference whose predictions and probabilities are exactly what
``/v1/models/{id}/predict`` answers, for a regression, a binary, a seven-class and a count model, with binary tensor
data (tritonclient's default) and JSON, by name, version number and alias. Errors are problem+json with the
protocol's ``error`` member, the message tritonclient raises."""

import gzip
import io
import json
import socket
import threading
import time

import numpy as np
import pandas as pd
import pytest
import uvicorn
from tritonclient.http import InferenceServerClient, InferInput, InferRequestedOutput
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from app.main import create_app
from tests.support.data import ABALONE, DATA
from tests.support.jobs import FEATURE_COLUMNS, submit, upload_frame
from tests.support.problems import assert_problem
from tests.support.synthetic import GRADES, grades_table, visits_table

pytestmark = pytest.mark.integration

FOREST = {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
PATH = {"n_lambdas": 8, "max_rules": 8}
N_ROWS = 300


@pytest.fixture(scope="module")
def triton(stack):
    """A tritonclient on the stack's API served by uvicorn on a loopback port (in a thread)."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(stack.settings), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    client = InferenceServerClient(f"127.0.0.1:{listening.getsockname()[1]}")
    yield client
    client.close()
    server.should_exit = True
    thread.join(timeout=10)


def tables() -> dict[str, tuple[pd.DataFrame, str, dict]]:
    """name -> (table, target, upload query) of a regression, a binary, a seven-class and a count table."""
    abalone = pd.read_csv(io.BytesIO(gzip.decompress(ABALONE.read_bytes()))).iloc[:N_ROWS]
    credit = pd.read_csv(DATA / "credit_data.csv.gz").iloc[:N_ROWS]
    return {
        "oip-rings": (abalone, "rings", {}),
        "oip-credit": (credit, "Status", {}),
        "oip-grades": (grades_table(N_ROWS), "grade", {}),
        "oip-visits": (visits_table(N_ROWS), "visits", {"task": "count"}),
    }


@pytest.fixture(scope="module")
def models(stack):
    """name -> (rows to score, [model document per version]): each table's selected step promoted as version 1
    (the rings: step 1 as version 2 and the alias champion on version 1)."""
    jobs, known = {}, tables()
    for name, (frame, target, query) in known.items():
        dataset_id = upload_frame(stack, frame, target, **query)
        jobs[name] = submit(stack, {"dataset_id": dataset_id, "forest": FOREST, **PATH})["id"]
    found = {}
    for name, job_id in jobs.items():
        stack.wait_for(job_id, ("succeeded",), timeout=120)
        versions = [stack.client.post("/v1/models", json={"job_id": job_id, "name": name}).json()]
        if name == "oip-rings":
            versions.append(stack.client.post("/v1/models", json={"job_id": job_id, "name": name, "step": 1}).json())
            aliased = stack.client.put(f"/v1/registered-models/{name}/aliases/champion", json={"version": 1})
            assert aliased.status_code == 200, aliased.text
        frame, target, _ = known[name]
        found[name] = (frame.drop(columns=[target]).iloc[::7], versions)
    return found


def predict(stack, model: dict, rows: pd.DataFrame) -> dict:
    values = rows.astype(object).where(rows.notna(), None).to_numpy().tolist()
    response = stack.client.post(
        f"/v1/models/{model['id']}/predict", json={"dataframe_split": {"columns": list(rows.columns), "data": values}}
    )
    assert response.status_code == 200, response.text
    return response.json()


def inputs(rows: pd.DataFrame, binary: bool) -> list[InferInput]:
    """A tensor per column as a client would build it: numbers as they come (INT64 or FP64, NaN missing), text as
    BYTES ('' missing)."""
    tensors = []
    for name in rows.columns:
        column = rows[name]
        values = column.to_numpy() if pd.api.types.is_numeric_dtype(column) else column.fillna("").to_numpy(object)
        tensor = InferInput(name, list(values.shape), np_to_triton_dtype(values.dtype))
        tensors.append(tensor.set_data_from_numpy(values, binary_data=binary))
    return tensors


def labels(values: np.ndarray) -> list:
    return [value.decode() if isinstance(value, bytes) else value for value in values.tolist()]


def test_server_health_and_metadata(triton):
    assert triton.is_server_live() and triton.is_server_ready()
    metadata = triton.get_server_metadata()
    assert metadata["name"] == "fire-rules" and metadata["extensions"] == ["binary_tensor_data"]


def test_a_regression_model_by_name_version_and_alias_answers_as_predict(stack, triton, models):
    rows, (first, second) = models["oip-rings"]
    assert first["n_rules"] != second["n_rules"]  # the versions differ: answering the right one is tested
    rows = rows.assign(Sex=rows["Sex"].mask(rows.index == rows.index[0]))  # a missing category: '' in BYTES
    metadata = triton.get_model_metadata("oip-rings")
    assert metadata == {
        "name": "oip-rings",
        "versions": ["2", "1"],
        "platform": "fire-rules",
        "inputs": [
            {"name": name, "datatype": "BYTES" if name == "Sex" else "FP64", "shape": [-1]} for name in FEATURE_COLUMNS
        ],
        "outputs": [{"name": "predictions", "datatype": "FP64", "shape": [-1]}],
    }
    assert triton.get_model_metadata("oip-rings", "1") == metadata
    assert triton.is_model_ready("oip-rings") and triton.is_model_ready("oip-rings", "champion")
    assert not triton.is_model_ready("oip-rings", "3")
    for version, model in (("", second), ("2", second), ("1", first), ("champion", first)):
        expected = predict(stack, model, rows)["predictions"]
        for binary in (True, False):
            result = triton.infer(
                "oip-rings",
                inputs(rows, binary),
                model_version=version,
                outputs=[InferRequestedOutput("predictions", binary_data=binary)],
                request_id=f"rings-{version}",
            )
            response = result.get_response()
            assert response["model_version"] == str(model["version"]) and response["id"] == f"rings-{version}"
            assert result.as_numpy("predictions").tolist() == expected

    # the champion over MLflow's protocol, in JSON and in CSV: the same numbers
    champion = "/v1/registered-models/oip-rings/aliases/champion/invocations"
    split = {"columns": list(rows.columns), "data": rows.astype(object).where(rows.notna(), None).to_numpy().tolist()}
    as_json = stack.client.post(champion, json={"dataframe_split": split})
    as_csv = stack.client.post(champion, content=rows.to_csv(index=False), headers={"Content-Type": "text/csv"})
    assert as_json.json() == as_csv.json() == {"predictions": predict(stack, first, rows)["predictions"]}
    assert as_json.headers["X-Model-Version"] == as_csv.headers["X-Model-Version"] == str(first["version"])


@pytest.mark.parametrize(
    ("name", "classes"), [("oip-credit", ["bad", "good"]), ("oip-grades", GRADES), ("oip-visits", None)]
)
def test_classifiers_and_counts_answer_labels_probabilities_and_rates_as_predict(stack, triton, models, name, classes):
    rows, (model,) = models[name]
    outputs = triton.get_model_metadata(name)["outputs"]
    expected = predict(stack, model, rows)
    if classes is None:
        assert outputs == [{"name": "predictions", "datatype": "FP64", "shape": [-1]}]
    else:
        assert outputs == [
            {"name": "predictions", "datatype": "BYTES", "shape": [-1]},
            {
                "name": "probabilities",
                "datatype": "FP64",
                "shape": [-1, len(classes)],
                "parameters": {"classes": json.dumps(classes)},
            },
        ]
        probabilities = np.array(expected["probabilities"])
        if len(classes) == 2:  # /v1 gives P(classes[1]); the protocol a column per class
            probabilities = np.stack([1.0 - probabilities, probabilities], axis=1)
    as_json = [InferRequestedOutput(output["name"], binary_data=False) for output in outputs]
    # no outputs named: tritonclient asks for all of them in binary
    for result in (triton.infer(name, inputs(rows, True)), triton.infer(name, inputs(rows, False), outputs=as_json)):
        assert labels(result.as_numpy("predictions")) == expected["predictions"]
        if classes is not None:
            np.testing.assert_array_equal(result.as_numpy("probabilities"), probabilities)
    if classes is not None:  # one output asked for: only that one
        only = triton.infer(name, inputs(rows, True), outputs=[InferRequestedOutput("probabilities")])
        assert [output["name"] for output in only.get_response()["outputs"]] == ["probabilities"]


def test_errors_are_problems_with_the_protocols_error_message(stack, triton, models):
    rows, _ = models["oip-rings"]
    for call in (
        lambda: triton.get_model_metadata("no-such-model"),
        lambda: triton.infer("no-such-model", inputs(rows, True)),
    ):
        with pytest.raises(InferenceServerException) as raised:
            call()
        assert raised.value.status() == "404"
        assert raised.value.message() == (
            "No model name with id 'no-such-model'. path.name: unknown model name 'no-such-model' "
            "(promote a job step under this name, or list the names)"
        )
    assert not triton.is_model_ready("no-such-model")

    def refused(tensors: list[InferInput], field: str, message: str, **options) -> None:
        with pytest.raises(InferenceServerException) as raised:
            triton.infer("oip-rings", tensors, **options)
        assert raised.value.status() == "400"
        assert f"{field}: {message}" in raised.value.message(), raised.value.message()

    one = rows.iloc[:1]
    refused(inputs(one, True)[1:], "body.inputs.Sex", "missing input")
    as_text = InferInput("Length", [1], "BYTES").set_data_from_numpy(np.array(["0.4"], dtype=object))
    refused(
        [*inputs(one.drop(columns="Length"), True), as_text],
        "body.inputs.Length",
        "datatype BYTES for a numeric column",
    )
    as_bool = InferInput("Length", [1], "BOOL").set_data_from_numpy(np.array([True]), binary_data=False)
    refused(
        [*inputs(one.drop(columns="Length"), False), as_bool],
        "body.inputs.Length",
        "datatype BOOL for a numeric column",
    )
    wide = InferInput("Length", [1, 2], "FP64").set_data_from_numpy(np.array([[0.4, 0.5]]))
    refused([*inputs(one.drop(columns="Length"), True), wide], "body.inputs.Length", "shape [1, 2]")
    refused(
        inputs(one, True),
        "body.outputs.probabilities",
        "no such output",
        outputs=[InferRequestedOutput("probabilities")],
    )

    unknown_category = {
        "inputs": [{"name": name, "datatype": "FP64", "shape": [1], "data": [0.1]} for name in FEATURE_COLUMNS[1:]]
    }
    unknown_category["inputs"].append({"name": "Sex", "datatype": "BYTES", "shape": [1], "data": ["Q"]})
    body = assert_problem(stack.client.post("/v2/models/oip-rings/infer", json=unknown_category), 422, "inputs.Sex")
    assert body["error"].startswith(body["detail"]) and "unknown categories ['Q']" in body["error"]
    body = assert_problem(stack.client.post("/v2/models/oip-rings/infer", content=b"{"), 400, "body")
    assert body["error"].startswith("The inference request does not validate. body: is not valid JSON")
    body = assert_problem(stack.client.get("/v2/models/oip-rings/versions/staging"), 404, "alias")
    assert body["errors"][0]["field"] == "path.alias"
