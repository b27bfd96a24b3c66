"""Drift that is exact on its own training data (issue 37): a model sent its own training rows flags nothing.

- Every way a table enters the service reads the same text as the same float64, the one nearest to it (Python's
  ``float``): a CSV, JSON or Parquet upload, a scoring body (MLflow's four JSON shapes, CSV), the Open Inference
  Protocol and a batch file (CSV, Parquet), each through the service's own code, on hard cases.
- The drift bins: edges that no training value sits on (``solver.binning.quantile_edges``), sensible for ties,
  binary, constant and empty columns, labels that read as the edges.
- Through the real service (upload as CSV, train, promote, score the training rows back by every route):
  every bin counts exactly its training rows, every PSI is 0 and every rule fires on as many rows, on
  scikit-learn's ``load_diabetes`` (the issue's case) and on generated tables with ties, binary and integer
  columns, missing values and values printed with 17 digits; a column shifted by one SD is the only one flagged.
- A profile stored before (version 1, the training deciles as edges) is taken again from the model's dataset and
  its counts are never read in the new bins; without its dataset it is read as it is.
"""

import io
import json
import math
import re
import time
import uuid

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.datasets import load_diabetes

from app.api.inference_protocol import parse_request, read_inputs
from app.api.scoring import parse_body
from app.core.batch.chunks import score_chunk
from app.core.batch.files import BatchInput, read_chunks
from app.core.config import Settings
from app.core.drift import PROFILE_VERSION, Binning, ColumnProfile, Layout, TrainingProfile, training_profile
from app.core.model_scoring import ScoringModel, score_rows
from app.core.table_parsing import parse_table
from app.core.tables import MAX_EXPOSURE, MIN_EXPOSURE, validate_table
from solver import RuleEnsemble
from solver.binning import quantile_edges
from solver.encoding import TableEncoding
from tests.support.drift import drift, expected_bins, flush, records
from tests.support.jobs import submit

# ---- every entrance reads the same text as the same float -------------------------------------------------------


def _hard_texts() -> list[str]:
    """Numbers as clients write them: 17 significant digits, ``repr``, ``%.6g``, subnormals, large exponents (within
    float32's range, which uploads check), halfway cases, one number written several ways."""
    rng = np.random.default_rng(37)
    values = rng.normal(size=300) * 10.0 ** rng.integers(-12, 12, size=300)
    texts = [text for x in values for text in (f"{x:.17g}", repr(float(x)), f"{x:.6g}", f"{x:.16e}")]
    texts += ["5e-324", "4.9406564584124654e-324", "2.2250738585072009e-308", "2.2250738585072014e-308"]
    texts += ["1.7e-310", "3.4028234663852886e+38", "-1e38", "1.2345678901234567e+30", "9007199254740993"]
    texts += ["1.00000000000000011102230246251565404236316680908203125", "0.30000000000000004", "0.1"]
    texts += ["1e5", "100000", "1E5", "1e+05", "-0", "-0.0", "0", "123456789012345678"]
    return texts


PLAIN = _hard_texts()  # JSON numbers, as every entrance reads them
# the same numbers dressed as CSV cells and text may carry them (not JSON numbers): a leading '+', spaces, bare dots
DRESSED = [f"+{t}" if not t.startswith("-") else t for t in PLAIN[:200:3]]
DRESSED += [f" {t}" for t in PLAIN[1:200:3]] + [f"{t} " for t in PLAIN[2:200:3]]
DRESSED += ["+.5e-3", ".5", "5.", "00012", " +1.5 "]
DRESSED = (DRESSED * math.ceil(len(PLAIN) / len(DRESSED)))[: len(PLAIN)]
JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
ENCODING = TableEncoding.numeric(["plain", "dressed"])


def _float_bits(values) -> list[int]:
    """Each float's bits, a zero's sign aside (JSON's -0 is the integer 0, CSV's -0.0 a negative zero; every
    comparison, a rule's or a bin's, reads them as one number)."""
    return (np.asarray(values, dtype=np.float64) + 0.0).view(np.int64).tolist()


def _expected() -> dict[str, list[int]]:
    return {"plain": _float_bits([float(t) for t in PLAIN]), "dressed": _float_bits([float(t) for t in DRESSED])}


def _csv(with_target: bool) -> str:
    header = "plain,dressed" + (",y" if with_target else "")
    rows = [f"{p},{d}" + (f",{k % 7}" if with_target else "") for k, (p, d) in enumerate(zip(PLAIN, DRESSED))]
    return "\n".join([header, *rows]) + "\n"


def _json_records(with_target: bool) -> str:
    """Records with each plain number as a JSON number (its text as written) and each dressed one as a string."""
    assert all(JSON_NUMBER.fullmatch(t) for t in PLAIN)
    target = [f', "y": {k % 7}' if with_target else "" for k in range(len(PLAIN))]
    rows = [f'{{"plain": {p}, "dressed": {json.dumps(d)}{y}}}' for p, d, y in zip(PLAIN, DRESSED, target)]
    return "[" + ",".join(rows) + "]"


def _uploaded(data: bytes, content_type: str) -> np.ndarray:
    settings = Settings(max_rows=10_000)
    _, frame = parse_table(data, content_type, None, None, settings)
    encoding, X, *_ = validate_table(frame, "y", settings, "regression")
    assert encoding.column_names == ["plain", "dressed"]
    return X


class _Kept:
    """The encoded rows a scoring request hands to drift counting (``score_rows``' RowCounter)."""

    def __init__(self):
        self.X: np.ndarray | None = None

    def record(self, scoring, X):
        self.X = X

    def record_unseen(self, scoring, column, n_rows):
        raise AssertionError(f"{n_rows} rows refused for {column}")


SCORING = ScoringModel("m", "exact", 1, "t", RuleEnsemble([], 0.0, ENCODING.feature_names), ENCODING)


def _scored(read_table) -> np.ndarray:
    kept = _Kept()
    score_rows(SCORING, read_table, False, 10_000, counter=kept)
    assert kept.X is not None
    return kept.X


def _scoring_body(body: str, content_type: str) -> np.ndarray:
    return _scored(parse_body(body.encode(), content_type).read_table)


def _batch(data: bytes, file_format: str) -> np.ndarray:
    chunks = read_chunks(BatchInput(io.BytesIO(data), file_format), ENCODING.column_names, 10_000)
    return np.concatenate([score_chunk(SCORING, chunk).X for chunk in chunks])


def _parquet_of_text() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"plain": PLAIN, "dressed": DRESSED, "y": [float(k % 7) for k in range(len(PLAIN))]}), sink)
    return sink.getvalue()


def _oip_plain() -> np.ndarray:
    """The plain numbers as the Open Inference Protocol's JSON reads them (its numbers are JSON numbers only)."""
    body = json.dumps({"inputs": [{"name": "plain", "shape": [len(PLAIN)], "datatype": "FP64", "data": "PLAIN"}]})
    request, binary = parse_request(body.replace('"PLAIN"', f"[{','.join(PLAIN)}]").encode(), None)
    table, _ = read_inputs(request, binary, TableEncoding.numeric(["plain"]))
    return np.column_stack([table["plain"]])


def _entrances() -> dict:
    """Each entrance: the encoded columns it makes of the texts (plain, then dressed where it takes text), as the
    service stores or counts them."""
    split = {"columns": ["plain", "dressed"], "data": None}
    rows = ",".join(f"[{p}, {json.dumps(d)}]" for p, d in zip(PLAIN, DRESSED))
    columns = f'{{"plain": [{",".join(PLAIN)}], "dressed": {json.dumps(DRESSED)}}}'
    return {
        "upload CSV": lambda: _uploaded(_csv(True).encode(), "text/csv"),
        "upload JSON records": lambda: _uploaded(_json_records(True).encode(), "application/json"),
        "upload Parquet of text": lambda: _uploaded(_parquet_of_text(), "application/vnd.apache.parquet"),
        "scoring dataframe_records": lambda: _scoring_body(
            f'{{"dataframe_records": {_json_records(False)}}}', "application/json"
        ),
        "scoring dataframe_split": lambda: _scoring_body(
            json.dumps({"dataframe_split": split}).replace("null", f"[{rows}]"), "application/json"
        ),
        "scoring instances": lambda: _scoring_body(f'{{"instances": [{rows}]}}', "application/json"),
        "scoring inputs (columns)": lambda: _scoring_body(f'{{"inputs": {columns}}}', "application/json"),
        "scoring CSV body": lambda: _scoring_body(_csv(False), "text/csv"),
        "Open Inference Protocol (JSON)": _oip_plain,
        "batch CSV (Arrow)": lambda: _batch(_csv(False).encode(), "csv"),
        "batch Parquet of text": lambda: _batch(_parquet_of_text(), "parquet"),
    }


@pytest.mark.parametrize("entrance", list(_entrances()))
def test_every_entrance_reads_the_same_text_as_the_same_float64(entrance):
    X = _entrances()[entrance]()
    expected = _expected()
    assert len(X) == len(PLAIN)
    for j, name in enumerate(ENCODING.column_names[: X.shape[1]]):
        got = _float_bits(X[:, j])
        texts = PLAIN if j == 0 else DRESSED
        wrong = [(text, float(x)) for text, x, bits, want in zip(texts, X[:, j], got, expected[name]) if bits != want]
        assert got == expected[name], f"{name}: {len(wrong)} values differ, as {wrong[:3]}"


def test_target_exposure_and_offset_given_as_text_read_as_the_features_do():
    # the positive texts an exposure may be (611 of 616: not the five subnormal ones, below its bound; issue 38)
    texts = [t for t in PLAIN if MIN_EXPOSURE <= float(t) <= MAX_EXPOSURE]
    records = [{"x": k % 5, "y": t, "exposure": t, "offset": t} for k, t in enumerate(texts)]
    settings = Settings(max_rows=10_000)
    _, frame = parse_table(json.dumps(records).encode(), "application/json", None, None, settings)
    _, _, y, _, _, rows = validate_table(frame, "y", settings, "regression", exposure="exposure", offset="offset")
    expected = _float_bits([float(t) for t in texts])
    assert _float_bits(y) == _float_bits(rows["exposure"]) == _float_bits(rows["offset"]) == expected


def test_pandas_default_csv_parser_is_what_the_upload_no_longer_uses():
    # the issue's cause, measured: pandas' default float parser is not correctly rounded on these texts
    default = pd.read_csv(io.StringIO(_csv(True)))["plain"].to_numpy()
    assert _float_bits(default) != _expected()["plain"]


# ---- the bins ---------------------------------------------------------------------------------------------------


def _profile_of(columns: dict[str, np.ndarray]) -> TrainingProfile:
    encoding = TableEncoding.numeric(list(columns))
    X = np.column_stack(list(columns.values()))
    return training_profile(RuleEnsemble([], 0.0, encoding.feature_names), encoding, X)


def test_no_training_value_lies_on_an_edge_and_each_bin_is_a_decile():
    rng = np.random.default_rng(0)
    columns = {
        "normal": rng.normal(size=1000),
        "rounded": np.round(rng.normal(size=1000), 2),  # ties
        "diabetes_bmi": load_diabetes().data[:, 2][rng.integers(0, 442, 1000)],
        "integers": rng.integers(18, 90, 1000).astype(float),
    }
    profile = _profile_of(columns)
    assert profile.version == PROFILE_VERSION
    for column, (name, values) in zip(profile.columns, columns.items()):
        edges = np.asarray(column.edges)
        assert np.all(np.diff(edges) > 0)
        assert not np.isin(values, edges).any(), name
        # each edge lies between a decile and the next larger training value (a tree threshold's place)
        distinct = np.unique(values)
        below = distinct[np.searchsorted(distinct, edges) - 1]
        above = distinct[np.searchsorted(distinct, edges)]
        assert np.all((below < edges) & (edges < above)) and np.allclose(edges, (below + above) / 2)
        deciles = np.quantile(values, np.arange(1, 10) / 10, method="lower")
        assert set(below) == set(deciles[deciles < values.max()]), name
        # the bins hold the rows at or below each decile: a tenth each where there are no ties
        shares = np.array(column.rows[:-1]) / len(values)
        assert column.rows == expected_bins(column.model_dump(), pd.Series(values)).tolist()
        if name == "normal":
            assert np.allclose(shares, 0.1, atol=0.002)


def test_binary_constant_empty_and_tied_columns_get_sensible_bins():
    n = 400
    flag = np.tile([0.0, 1.0, 1.0, 0.0, 1.0], n // 5)
    columns = {
        "flag": flag,
        "rare": np.where(np.arange(n) % 50 == 0, 1.0, 0.0),  # 2% ones: no decile is 1, still two bins
        "constant": np.full(n, 3.25),
        "empty": np.full(n, np.nan),
        "mostly_zero": np.where(np.arange(n) % 10 < 8, 0.0, np.arange(n) / 7),  # 80% ties at 0
        "with_missing": np.where(np.arange(n) % 4 == 0, np.nan, np.arange(n) % 13),
    }
    profile = {column.name: column for column in _profile_of(columns).columns}
    assert profile["flag"].edges == [0.5] and profile["flag"].bins == ["<= 0.5", "> 0.5", "missing"]
    assert profile["flag"].rows == [160, 240, 0]
    assert profile["rare"].edges == [0.5] and profile["rare"].rows == [392, 8, 0]
    assert profile["constant"].edges == [] and profile["constant"].bins == ["all", "missing"]
    assert profile["constant"].rows == [n, 0]
    assert profile["empty"].edges == [] and profile["empty"].rows == [0, n]
    zero = profile["mostly_zero"]
    assert zero.bins[0] == f"<= {zero.edges[0]:.4g}" and zero.rows[0] == 320  # every tie in one bin
    assert 0 < zero.edges[0] < np.min(columns["mostly_zero"][columns["mostly_zero"] > 0])
    missing = profile["with_missing"]
    assert missing.rows[-1] == 100 and sum(missing.rows) == n
    assert missing.edges == [k + 0.5 for k in range(12) if k + 0.5 in missing.edges]  # halfway between integers
    assert not np.isin(columns["with_missing"], missing.edges).any()


def test_adjacent_floats_split_at_the_lower_and_labels_tell_close_edges_apart():
    low = 1.0
    high = np.nextafter(low, 2.0)  # no float lies between them: the edge is the lower one, as scikit-learn's split
    values = np.array([low] * 50 + [high] * 50)
    assert quantile_edges(values, 10).tolist() == [low]
    # 0.12341 and 0.12349 have their edge at 0.12345: "<= 0.1235" (4 digits) would read as though 0.12349 were below
    close = _profile_of({"x": np.array([0.12341, 0.12349, 0.2] * 10)}).columns[0]
    assert close.edges == [(0.12341 + 0.12349) / 2, (0.12349 + 0.2) / 2]
    assert close.bins == ["<= 0.12345", "(0.12345, 0.1617]", "> 0.1617", "missing"]


def test_a_value_read_a_unit_in_the_last_place_off_stays_in_its_training_bin():
    values = load_diabetes().data
    encoding = TableEncoding.numeric([f"x{j}" for j in range(values.shape[1])])
    ensemble = RuleEnsemble([], 0.0, encoding.feature_names)
    profile = training_profile(ensemble, encoding, values)
    binning = Binning(ensemble, encoding, profile)
    exact = binning.count(values)
    for direction in (-np.inf, np.inf):
        assert np.array_equal(binning.count(np.nextafter(values, direction)), exact)
    training = np.concatenate([column.rows for column in profile.columns])
    assert np.array_equal(exact[binning.layout.bins_at[0] :], training)


def test_counts_of_a_profile_version_are_kept_under_fields_of_their_own():
    column = ColumnProfile(name="x", kind="numeric", edges=[0.5], bins=["<= 0.5", "> 0.5", "missing"], rows=[1, 1, 0])
    old = TrainingProfile.model_validate_json(
        json.dumps({"n_rows": 2, "rule_rows": [1], "columns": [column.model_dump()]})  # stored before versions
    )
    new = old.model_copy(update={"version": PROFILE_VERSION})
    assert old.version == 1
    assert Layout(old).field_names() == ["n", "u:0", "r:0", "c:0:0", "c:0:1", "c:0:2"]
    assert Layout(new).field_names() == [f"v{PROFILE_VERSION}/{name}" for name in Layout(old).field_names()]


# ---- through the service: the training rows scored back by every route ------------------------------------------


def _diabetes() -> tuple[pd.DataFrame, str]:
    return load_diabetes(as_frame=True).frame, "target"


def _mixed(n_rows: int = 700, seed: int = 1) -> tuple[pd.DataFrame, str]:
    """Ties, binary, integer and text columns, missing values, 17-digit values, a constant column."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "ties": rng.choice([0.0, 0.0, 0.0, 0.0, 1.5, 2.25, 7.0], n_rows),
            "flag": rng.integers(0, 2, n_rows),
            "rare": (rng.random(n_rows) < 0.03).astype(int),
            "age": rng.integers(18, 90, n_rows),
            "income": np.where(rng.random(n_rows) < 0.15, np.nan, rng.lognormal(10, 1, n_rows)),
            "score": rng.normal(size=n_rows) / 3,
            "tenths": rng.integers(0, 30, n_rows) * 0.1,  # 0.30000000000000004 and friends
            "region": rng.choice(["north", "south", "east"], n_rows),
            "constant": np.full(n_rows, 2.5),
        }
    )
    income = np.nan_to_num(frame["income"], nan=20_000.0)
    frame["y"] = frame["ties"] + 2 * frame["flag"] + np.log(income) + frame["score"] + rng.normal(size=n_rows)
    return frame, "y"


def _standardised(n_rows: int = 600, seed: int = 2) -> tuple[pd.DataFrame, str]:
    """A classification table of standardised numeric columns, as the issue's three more real tables were."""
    rng = np.random.default_rng(seed)
    raw = pd.DataFrame(
        {
            "dose": rng.choice([10, 20, 40, 80], n_rows).astype(float),
            "weight": np.round(rng.normal(70, 12, n_rows), 1),
            "visits": rng.poisson(2, n_rows).astype(float),
            "smoker": rng.integers(0, 2, n_rows).astype(float),
        }
    )
    frame = (raw - raw.mean()) / raw.std()
    logit = frame["dose"] + frame["smoker"] - 0.5 * frame["weight"]
    frame["outcome"] = np.where(rng.random(n_rows) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return frame, "outcome"


TABLES = {"diabetes": _diabetes, "mixed": _mixed, "standardised": _standardised}


def _csv_text(frame: pd.DataFrame) -> str:
    """The table as the client writes it: every float with 17 significant digits, a missing value empty."""
    return frame.to_csv(index=False, float_format="%.17g")


@pytest.fixture(scope="module")
def served(stack) -> dict[str, tuple[pd.DataFrame, dict, str]]:
    """name -> (features as the client holds them, the promoted model, the job id) per table, uploaded as CSV."""
    jobs = {}
    for name, make in TABLES.items():
        frame, target = make()
        uploaded = stack.client.post(
            f"/v1/datasets?target={target}", content=_csv_text(frame).encode(), headers={"Content-Type": "text/csv"}
        )
        assert uploaded.status_code in (200, 201), uploaded.text
        forest = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt", "random_state": 0}
        body = {"dataset_id": uploaded.json()["id"], "forest": forest, "n_lambdas": 10, "max_rules": 10}
        jobs[name] = (frame.drop(columns=[target]), submit(stack, body)["id"])
    found = {}
    for name, (features, job_id) in jobs.items():
        stack.wait_for(job_id, ("succeeded",), timeout=180)
        model = stack.client.post("/v1/models", json={"job_id": job_id, "name": f"exact-{name}-{uuid.uuid4().hex[:6]}"})
        assert model.status_code == 201, model.text
        found[name] = (features, model.json(), job_id)
    return found


CSV_BODY = {"Content-Type": "text/csv"}
JSON_BODY = {"Content-Type": "application/json"}


def _oip_body(features: pd.DataFrame) -> str:
    inputs = [
        {
            "name": name,
            "shape": [len(column)],
            "datatype": "BYTES" if column.dtype == object else "FP64",
            "data": [("" if v is None or v != v else v) for v in column.tolist()]
            if column.dtype == object
            else column.astype(float).tolist(),
        }
        for name, column in features.items()
    ]
    return json.dumps({"inputs": inputs})  # a missing number as NaN, as Python's json writes it


def _routes(stack, features: pd.DataFrame, model: dict) -> dict:
    """Each route: a call sending every training row once (its source in the drift report)."""
    text = _csv_text(features)

    def batch():
        response = stack.client.post(
            f"/v1/models/{model['id']}/batch?chunk_rows=250",
            files={"file": ("rows.csv", text.encode(), "text/csv")},
        )
        assert response.status_code == 202, response.text
        assert stack.wait_for(response.json()["id"], ("succeeded",))["status"] == "succeeded"

    def post(url: str, **body):
        response = stack.client.post(url, **body)
        assert response.status_code == 200, response.text

    model_url = f"/v1/models/{model['id']}"
    version_url = f"/v1/registered-models/{model['name']}/versions/1"
    oip_url = f"/v2/models/{model['name']}/versions/1/infer"
    return {
        "JSON records": ("live", lambda: post(f"{model_url}/predict", json={"dataframe_records": records(features)})),
        "CSV body": ("live", lambda: post(f"{version_url}/invocations", content=text, headers=CSV_BODY)),
        "Open Inference Protocol": ("live", lambda: post(oip_url, content=_oip_body(features), headers=JSON_BODY)),
        "batch file": ("batch", batch),
    }


def _assert_counts_are_the_training_rows(before: dict, after: dict, features: pd.DataFrame) -> None:
    n = len(features)
    assert after["rows"] - before["rows"] == n
    for column, earlier in zip(after["columns"], before["columns"]):
        counted = np.array(column["live_rows"]) - np.array(earlier["live_rows"])
        training = expected_bins(column, features[column["column"]])  # pandas, on the client's own floats
        assert counted.tolist() == training.tolist(), column["column"]
        assert column["training_shares"] == pytest.approx((training / n).tolist(), abs=1e-12)
        if column["kind"] == "numeric":  # no training value lies on an edge
            assert not np.isin(features[column["column"]].to_numpy(dtype=float), column["edges"]).any()


@pytest.mark.parametrize("table", list(TABLES))
def test_the_training_rows_scored_back_by_every_route_flag_nothing(stack, served, table):
    features, model, _ = served[table]
    for route, (source, send) in _routes(stack, features, model).items():
        before = drift(stack, model["id"], source=source)
        send()
        flush(stack)
        after = drift(stack, model["id"], source=source)
        _assert_counts_are_the_training_rows(before, after, features)
        psi = {column["column"]: column["psi"] for column in after["columns"]}
        assert max(psi.values()) < 0.01 and after["drifted_columns"] == [], (route, psi)

    report = drift(stack, model["id"])
    n = len(features)
    assert report["rows"] == 4 * n
    assert report["drifted_columns"] == [] and report["drifted_rules"] == []
    for column in report["columns"]:
        assert column["psi"] < 0.01 and column["psi"] == pytest.approx(0.0, abs=1e-12), column["column"]
    for rule in report["rules"]:  # the same rows: as many firing rows, and a ratio well within sampling error
        assert rule["live_rows"] == round(4 * n * rule["training_rate"]), rule
        spread = math.sqrt(rule["training_rate"] * (1 - rule["training_rate"]) * (1 / n + 1 / (4 * n)))
        assert abs(rule["live_rate"] - rule["training_rate"]) <= 3 * spread and rule["p_value"] == 1.0
        if rule["training_rate"] > 0:
            assert rule["ratio"] == pytest.approx(1.0, abs=1e-12)


def test_the_diabetes_bmi_shifted_by_one_sd_is_the_only_column_flagged(stack, served):
    features, _, job_id = served["diabetes"]
    name = f"exact-shift-{uuid.uuid4().hex[:6]}"
    model = stack.client.post("/v1/models", json={"job_id": job_id, "name": name}).json()
    shifted = features.assign(bmi=features["bmi"] + features["bmi"].std())
    response = stack.client.post(f"/v1/models/{model['id']}/predict", json={"dataframe_records": records(shifted)})
    assert response.status_code == 200, response.text
    flush(stack)
    report = drift(stack, model["id"])
    assert report["drifted_columns"] == ["bmi"]
    psi = {column["column"]: column["psi"] for column in report["columns"]}
    assert psi["bmi"] > 0.25 and all(value == pytest.approx(0.0, abs=1e-12) for c, value in psi.items() if c != "bmi")
    bmi_rules = {
        rule["id"] for rule in model["ensemble"]["rules"] if any(c["feature"] == "bmi" for c in rule["conditions"])
    }
    assert set(report["drifted_rules"]) <= bmi_rules


def _as_stored_before(profile: TrainingProfile, features: pd.DataFrame) -> dict:
    """``profile`` as the release before issue 37 stored it: no version, the training deciles themselves as edges."""
    old = profile.model_dump(exclude={"version"})
    for column in old["columns"]:
        if column["kind"] == "numeric":
            values = features[column["name"]].to_numpy(dtype=float)
            column["edges"] = np.unique(np.quantile(values[~np.isnan(values)], np.linspace(0.1, 0.9, 9))).tolist()
            column["bins"] = [f"bin {k}" for k in range(len(column["edges"]) + 1)] + ["missing"]
            column["rows"] = expected_bins(column, pd.Series(values)).tolist()
    return old


def test_a_profile_stored_before_is_taken_again_and_its_counts_are_not_read_in_the_new_bins(stack, served):
    features, _, job_id = served["standardised"]
    model = stack.client.post("/v1/models", json={"job_id": job_id, "name": f"exact-old-{uuid.uuid4().hex[:6]}"}).json()
    store = stack.client.app.state.core.models
    taken = store.profile(model["id"])
    assert taken is not None and taken.version == PROFILE_VERSION
    store.blobs.put(store.keys.model_profile(model["id"]), json.dumps(_as_stored_before(taken, features)).encode())
    old = store.drift.profile(model["id"])
    assert old is not None and old.version == 1
    # counts under the old profile's fields, as the earlier release added them: never read in the new bins
    store.drift.add(model["id"], "live", time.time(), Layout(old), np.full(Layout(old).size, 7))

    report = drift(stack, model["id"])  # the profile is taken again from the stored dataset
    assert store.drift.profile(model["id"]) == taken
    assert [column["edges"] for column in report["columns"]] == [column.edges for column in taken.columns]
    assert report["rows"] == 0 and all(column["live_rows"] == [0] * len(column["bins"]) for column in report["columns"])


def test_a_profile_stored_before_whose_dataset_is_gone_is_read_and_counted_as_it_is(stack):
    frame, target = _mixed(n_rows=240, seed=5)
    uploaded = stack.client.post(
        f"/v1/datasets?target={target}", content=_csv_text(frame).encode(), headers={"Content-Type": "text/csv"}
    )
    assert uploaded.status_code == 201, uploaded.text
    forest = {"n_estimators": 10, "max_depth": 2, "max_features": "sqrt", "random_state": 0}
    job = submit(stack, {"dataset_id": uploaded.json()["id"], "forest": forest, "n_lambdas": 5, "max_rules": 5})
    stack.wait_for(job["id"], ("succeeded",))
    model = stack.client.post("/v1/models", json={"job_id": job["id"], "name": f"exact-gone-{uuid.uuid4().hex[:6]}"})
    model_id = model.json()["id"]
    store = stack.client.app.state.core.models
    features = frame.drop(columns=[target])
    old = _as_stored_before(store.profile(model_id), features)
    store.blobs.put(store.keys.model_profile(model_id), json.dumps(old).encode())
    assert stack.client.delete(f"/v1/datasets/{uploaded.json()['id']}").status_code == 204

    scored = stack.client.post(f"/v1/models/{model_id}/predict", json={"dataframe_records": records(features)})
    assert scored.status_code == 200, scored.text
    flush(stack)
    report = drift(stack, model_id)
    assert store.drift.profile(model_id).version == 1  # nothing to take it again from: read as stored
    assert report["rows"] == len(features)
    for column, stored in zip(report["columns"], old["columns"]):
        assert column["edges"] == stored["edges"] and column["bins"] == stored["bins"]
        assert column["live_rows"] == expected_bins(column, features[column["column"]]).tolist()
