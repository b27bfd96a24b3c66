"""Jobs through the HTTP API, as the service tests submit them: a small forest, a path, a promoted model."""

SMALL_FOREST = {"kind": "random_forest", "n_estimators": 50, "max_depth": 3, "max_features": "sqrt"}
FEATURE_COLUMNS = [
    "Sex",
    "Length",
    "Diameter",
    "Height",
    "Whole_weight",
    "Shucked_weight",
    "Viscera_weight",
    "Shell_weight",
]


def submit(stack, body: dict, **headers) -> dict:
    response = stack.client.post("/v1/jobs", json=body, headers=headers)
    assert response.status_code == 202, response.text
    assert response.headers["Location"] == f"/v1/jobs/{response.json()['id']}"
    return response.json()


def upload_frame(stack, frame, target: str, **query) -> str:
    """The id of ``frame`` uploaded as CSV with target column ``target`` (``query``: upload parameters, e.g. task)."""
    params = "".join(f"&{name}={value}" for name, value in query.items())
    response = stack.client.post(
        f"/v1/datasets?target={target}{params}",
        content=frame.to_csv(index=False).encode(),
        headers={"Content-Type": "text/csv"},
    )
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


def train_forest(stack, dataset_id: str, **params) -> str:
    response = stack.client.post("/v1/forests/train", json={"dataset_id": dataset_id, **SMALL_FOREST, **params})
    assert response.status_code == 202, response.text
    job = stack.wait_for(response.json()["id"], ("succeeded",))
    return job["summary"]["forest_id"]


ABALONE_ROW = {
    "Sex": "M",
    "Length": 0.4,
    "Diameter": 0.3,
    "Height": 0.1,
    "Whole_weight": 0.5,
    "Shucked_weight": 0.2,
    "Viscera_weight": 0.1,
    "Shell_weight": 0.15,
}


def scoring_url(stack, abalone, name: str) -> str:
    """The predict URL of a model promoted from a short path job on the abalone forest."""
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 10})
    stack.wait_for(job["id"], ("succeeded",))
    model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": name}).json()
    return f"/v1/models/{model['id']}/predict"
