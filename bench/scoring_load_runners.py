"""What bench/scoring_load.py runs (its docstring says how): the single-row request bodies of every scoring route,
the routes, wrk and its Lua script (the saturating phase), locust and its generated locustfile (the paced phase), and
the two servers under test (the FIRE model it promotes, MLflow's scoring server of the comparable pipeline)."""

import csv
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
from service import free_port, upload_abalone  # bench/service.py: the service under test, own prefix and queue

REPO_ROOT = Path(__file__).resolve().parents[1]
FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt"}  # bench/load.py's
NAME, ALIAS = "scoring-load", "champion"
N_BODIES = 512  # different single-row bodies a load tool cycles through
JSON_TYPE, CSV_TYPE = "application/json", "text/csv"


# ---------------------------------------------------------------------------------------------------------------
# request bodies


def split_body(columns: list[str], row: list) -> bytes:
    return json.dumps({"dataframe_split": {"columns": columns, "data": [row]}}).encode()


def records_body(columns: list[str], row: list) -> bytes:
    return json.dumps({"dataframe_records": [dict(zip(columns, row))]}).encode()


def csv_body(columns: list[str], row: list) -> bytes:
    return (",".join(columns) + "\n" + ",".join(str(value) for value in row) + "\n").encode()


def oip_body(columns: list[str], row: list) -> bytes:
    """The Open Inference Protocol's request: one input per column, one row each."""
    inputs = [
        {
            "name": name,
            "datatype": "BYTES" if isinstance(value, str) else "FP64",
            "shape": [1],
            "data": [value],
        }
        for name, value in zip(columns, row)
    ]
    return json.dumps({"inputs": inputs}).encode()


BODIES = {
    "dataframe_split": (split_body, JSON_TYPE),
    "dataframe_records": (records_body, JSON_TYPE),
    "csv": (csv_body, CSV_TYPE),
    "oip": (oip_body, JSON_TYPE),
    "none": (lambda columns, row: b"", ""),
}


def predictions_of(answer: dict) -> list[float]:
    if "outputs" in answer:  # the Open Inference Protocol's answer
        return [float(value) for value in answer["outputs"][0]["data"]]
    return [float(value) for value in answer["predictions"]]


@dataclass
class Route:
    server: str  # "FIRE" or "MLflow"
    label: str  # the route as the table names it
    path: str
    body: str  # a key of BODIES
    optional: bool = False  # reported as not run (rather than failing the benchmark) where the route is missing
    method: str = "POST"  # GET: the calibration route, without a body or a model
    result: dict = field(default_factory=dict)  # the saturating (wrk) run's figures, or {"skipped": why}
    paced: dict = field(default_factory=dict)  # the paced (locust) run's figures


def routes(model_id: str) -> list[Route]:
    """The order they run in: each MLflow run right after the FIRE run it is compared with."""
    by_name = f"/v1/registered-models/{NAME}"
    return [
        # not a scoring route: how fast uvicorn and FastAPI answer anything on this machine now, as a yardstick
        Route("MLflow", "GET /ping (no model: calibration)", "/ping", "none", method="GET"),
        Route("FIRE", "POST /v1/models/{id}/predict", f"/v1/models/{model_id}/predict", "dataframe_split"),
        Route("FIRE", "POST /v1/models/{id}/predict", f"/v1/models/{model_id}/predict", "dataframe_records"),
        Route("FIRE", "POST /v1/registered-models/{name}/predict", f"{by_name}/predict", "dataframe_split"),
        Route(
            "FIRE",
            "POST /v1/registered-models/{name}/versions/{v}/predict",
            f"{by_name}/versions/1/predict",
            "dataframe_split",
        ),
        Route(
            "FIRE",
            "POST /v1/registered-models/{name}/aliases/{alias}/predict",
            f"{by_name}/aliases/{ALIAS}/predict",
            "dataframe_split",
        ),
        Route(
            "FIRE",
            "POST /v1/registered-models/{name}/aliases/{alias}/invocations",
            f"{by_name}/aliases/{ALIAS}/invocations",
            "dataframe_split",
        ),
        Route("MLflow", "POST /invocations (mlflow models serve)", "/invocations", "dataframe_split"),
        Route(
            "FIRE",
            "POST /v1/registered-models/{name}/aliases/{alias}/invocations",
            f"{by_name}/aliases/{ALIAS}/invocations",
            "csv",
        ),
        Route("MLflow", "POST /invocations (mlflow models serve)", "/invocations", "csv"),
        Route("MLflow", "POST /invocations (mlflow models serve)", "/invocations", "dataframe_records"),
        Route(
            "FIRE",
            "POST /v2/models/{name}/infer (Open Inference Protocol)",
            f"/v2/models/{NAME}/infer",
            "oip",
            optional=True,
        ),
        Route(
            "FIRE",
            "POST /v2/models/{name}/versions/{version}/infer (Open Inference Protocol)",
            f"/v2/models/{NAME}/versions/1/infer",
            "oip",
            optional=True,
        ),
    ]


# ---------------------------------------------------------------------------------------------------------------
# wrk


def lua_string(data: bytes) -> str:
    """A Lua string literal of any bytes (printable ASCII kept, everything else as a decimal escape)."""
    out = []
    for byte in data:
        char = chr(byte)
        if 32 <= byte < 127 and char not in '"\\':
            out.append(char)
        else:
            out.append(f"\\{byte:03d}")
    return '"' + "".join(out) + '"'


WRK_SCRIPT = """
local method = {method}
local path = {path}
local headers = {{["Content-Type"] = {content_type}}}
local bodies = {{
{bodies}
}}
local n = #bodies
local i = 0
local first = true

setup = function(thread)
  -- each wrk thread starts at another place in the bodies
  thread:set("offset", math.random(n))
end

request = function()
  if first then
    i = (tonumber(offset) or 0)
    first = false
  end
  if method == "GET" then
    return wrk.format("GET", path)
  end
  i = i % n + 1
  return wrk.format(method, path, headers, bodies[i])
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRK_JSON {{\\"requests\\": %d, \\"duration_us\\": %d, \\"bytes\\": %d, \\"connect\\": %d, \\"read\\": %d, "
    .. "\\"write\\": %d, \\"status\\": %d, \\"timeout\\": %d, \\"p50_us\\": %d, \\"p90_us\\": %d, "
    .. "\\"p99_us\\": %d, \\"p999_us\\": %d, \\"mean_us\\": %.1f, \\"max_us\\": %d}}\\n",
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.mean, latency.max))
end
"""


def write_script(directory: Path, index: int, route: Route, bodies: list[bytes]) -> Path:
    content_type = BODIES[route.body][1]
    script = WRK_SCRIPT.format(
        method=lua_string(route.method.encode()),
        path=lua_string(route.path.encode()),
        content_type=lua_string(content_type.encode()),
        bodies=",\n".join(lua_string(body) for body in bodies),
    )
    path = directory / f"route{index}.lua"
    path.write_text(script)
    return path


def run_wrk(url: str, script: Path, threads: int, clients: int, seconds: float) -> dict:
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{clients}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "5s",
        "--latency",
        "-s",
        str(script),
        url,
    ]
    cpu_before = children_cpu_s()
    completed = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60, check=False)
    cpu_s = children_cpu_s() - cpu_before
    line = next((row for row in completed.stdout.splitlines() if row.startswith("WRK_JSON ")), None)
    if completed.returncode != 0 or line is None:
        raise RuntimeError(
            f"wrk failed ({completed.returncode}): {completed.stdout[-2000:]} {completed.stderr[-2000:]}"
        )
    return {**json.loads(line.removeprefix("WRK_JSON ")), "tool_cpu_s": cpu_s}


def loadavg() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's finished children: a load tool's, around its run."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# ---------------------------------------------------------------------------------------------------------------
# locust (the paced phase)


LOCUSTFILE = """
# generated by bench/scoring_load.py: one route, paced single-row requests
import csv
import json
import random
from time import perf_counter

import gevent
from locust import FastHttpUser, constant_throughput, events, task
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

with open({spec_file!r}) as spec_file:
    SPEC = json.load(spec_file)
METHOD, PATH, NAME, BODIES = SPEC["method"], SPEC["path"], SPEC["name"], SPEC["bodies"]
HEADERS = {{"Content-Type": SPEC["content_type"]}} if SPEC["content_type"] else {{}}
PACE_S = SPEC["pace_ms"] / 1000


class PacedClient(FastHttpUser):
    wait_time = constant_throughput(1000 / SPEC["pace_ms"])  # one request every pace_ms (none if it is late)
    network_timeout = connection_timeout = SPEC["timeout_s"]  # wrk's --timeout

    def on_start(self):
        # -r equal to -u starts every user at once: each waits a random part of its period first, so that the
        # users call at independent phases (as separate apps do) rather than all in the same instant
        self.index = random.randrange(len(BODIES))
        gevent.sleep(random.uniform(0, PACE_S))
        self._cp_last_run, self._cp_last_wait_time = perf_counter(), 0  # constant_throughput's clock from here

    @task
    def score(self):
        self.index = (self.index + 1) % len(BODIES)
        body = BODIES[self.index]
        self.client.request(METHOD, PATH, data=body.encode() if body else None, headers=HEADERS, name=NAME)


@events.test_stop.add_listener
def final_csv(environment, **kwargs):
    # --csv's <prefix>_stats.csv is rewritten once a second while the test runs, not once more at its end, so it
    # misses up to its last second (locust issues 1806, 2299): locust's same tables again, from the final figures
    prefix = environment.parsed_options.csv_prefix
    for name, write in (("stats", "requests_csv"), ("failures", "failures_csv")):
        with open(prefix + "_final_" + name + ".csv", "w", newline="") as handle:
            getattr(StatsCSV(environment, PERCENTILES_TO_REPORT), write)(csv.writer(handle))
"""


def write_locustfile(directory: Path, index: int, route: Route, bodies: list[bytes], pace_ms: float) -> Path:
    spec = directory / f"paced{index}.json"
    spec.write_text(
        json.dumps(
            {
                "method": route.method,
                "path": route.path,
                "name": f"{route.server} {route.path} ({route.body})",
                "content_type": BODIES[route.body][1],
                "bodies": [body.decode() for body in bodies] if route.method != "GET" else [""],
                "pace_ms": pace_ms,
                "timeout_s": 5.0,
            }
        )
    )
    path = directory / f"paced{index}_locustfile.py"
    path.write_text(LOCUSTFILE.format(spec_file=str(spec)))
    return path


def run_locust(base: str, locustfile: Path, users: int, seconds: float, prefix: Path) -> dict:
    """One headless locust run; the "Aggregated" row of its _stats.csv (and its _failures.csv) as numbers."""
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--headless",
        "-u",
        str(users),
        "-r",
        str(users),
        "-t",
        f"{max(1, round(seconds))}s",
        "--csv",
        str(prefix),
        "--host",
        base,
        "--only-summary",
        "--loglevel",
        "WARNING",
    ]
    cpu_before, started = children_cpu_s(), time.monotonic()
    completed = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=seconds + 120,
        check=False,
        cwd=locustfile.parent,  # no locust.conf or pyproject.toml of the repository's picked up
    )
    cpu_s, wall_s = children_cpu_s() - cpu_before, time.monotonic() - started
    # the final tables the locustfile writes at the test's stop, else locust's own (up to a second short)
    final = (prefix.parent / f"{prefix.name}_final_stats.csv").exists()
    kind = "_final_" if final else "_"
    stats_csv = prefix.parent / f"{prefix.name}{kind}stats.csv"
    aggregated = None
    if stats_csv.exists():
        with stats_csv.open(newline="") as handle:
            aggregated = next((row for row in csv.DictReader(handle) if row["Name"] == "Aggregated"), None)
    # locust exits with 1 when any request failed: that is a result, not a failed run
    if completed.returncode not in (0, 1) or aggregated is None:
        raise RuntimeError(
            f"locust failed ({completed.returncode}): {completed.stdout[-2000:]} {completed.stderr[-2000:]}"
        )

    def number(key: str) -> float | None:
        value = aggregated.get(key)
        return None if value in (None, "", "N/A") else float(value)

    failures: dict[str, int] = {}
    failures_csv = prefix.parent / f"{prefix.name}{kind}failures.csv"
    if failures_csv.exists():
        with failures_csv.open(newline="") as handle:
            for row in csv.DictReader(handle):
                failures[row["Error"]] = failures.get(row["Error"], 0) + int(row["Occurrences"])
    return {
        "requests": int(number("Request Count") or 0),
        "failures": int(number("Failure Count") or 0),
        "requests_per_s": number("Requests/s") or 0.0,
        "p50_ms": number("50%"),
        "p90_ms": number("90%"),
        "p99_ms": number("99%"),
        "p999_ms": number("99.9%"),
        "mean_ms": number("Average Response Time"),
        "max_ms": number("Max Response Time"),
        "failure_kinds": failures,
        "stats_csv": stats_csv.name,
        # the load tool's own share of the machine's cores (its start, about a second, included)
        "locust_cpu_s": round(cpu_s, 2),
        "locust_wall_s": round(wall_s, 2),
        "locust_cores": round(cpu_s / wall_s, 2),
    }


# ---------------------------------------------------------------------------------------------------------------
# the two servers


def prepare_fire(http: httpx.Client) -> tuple[str, dict]:
    """(model id, model document): abalone uploaded, bench/load.py's path job, its selected step promoted as
    NAME version 1, the alias ALIAS pointing at it."""
    dataset = upload_abalone(http)
    job = (
        http.post(
            "/v1/jobs",
            json={
                "dataset_id": dataset["id"],
                "forest": {**FOREST, "random_state": 0},
                "n_lambdas": 20,
                "max_rules": 12,
            },
        )
        .raise_for_status()
        .json()
    )
    deadline = time.monotonic() + 600
    while True:
        job = http.get(f"/v1/jobs/{job['id']}").raise_for_status().json()
        if job["status"] in ("succeeded", "failed", "canceled"):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(job["id"])
        time.sleep(0.2)
    if job["status"] != "succeeded":
        raise RuntimeError(f"the path job {job['status']}: {job.get('error')}")
    model = http.post("/v1/models", json={"job_id": job["id"], "name": NAME}).raise_for_status().json()
    version = model.get("version", 1)
    http.put(f"/v1/registered-models/{NAME}/aliases/{ALIAS}", json={"version": version}).raise_for_status()
    return model["id"], model


class MlflowServer:
    """`mlflow models serve` of a scikit-learn pipeline fitted on abalone, in its own process group."""

    def __init__(self, frame: pd.DataFrame, target: pd.Series, workers: int, directory: Path):
        import mlflow.sklearn
        from mlflow.models import infer_signature
        from sklearn.compose import ColumnTransformer
        from sklearn.ensemble import RandomForestRegressor
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OneHotEncoder

        self.pipeline = Pipeline(
            [
                (
                    "encode",
                    ColumnTransformer(
                        [("sex", OneHotEncoder(handle_unknown="ignore"), ["Sex"])], remainder="passthrough"
                    ),
                ),
                ("forest", RandomForestRegressor(**FOREST, random_state=0)),
            ]
        ).fit(frame, target)
        self.model_dir = directory / "sklearn-model"
        mlflow.sklearn.save_model(
            self.pipeline,
            str(self.model_dir),
            signature=infer_signature(frame.head(20), self.pipeline.predict(frame.head(20))),
            skops_trusted_types=["sklearn.tree._tree.Tree"],  # our own file (MLflow 3 saves with skops)
        )
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        bin_dir = str(Path(sys.executable).parent)  # `mlflow models serve` runs the `uvicorn` on the PATH
        env = {
            **os.environ,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "UVICORN_LOG_LEVEL": "warning",  # as the service's `--log-level warning`: no access log per request
            "MLFLOW_TRACKING_URI": (directory / "mlruns").as_uri(),
        }
        mlflow_cli = shutil.which("mlflow", path=bin_dir) or "mlflow"
        self.log = open(directory / "mlflow-serve.log", "wb")  # noqa: SIM115  closed in close()
        self.process = subprocess.Popen(
            [
                mlflow_cli,
                "models",
                "serve",
                "-m",
                str(self.model_dir),
                "--env-manager",
                "local",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "--workers",
                str(workers),
            ],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its uvicorn (and worker processes) in one group that close() ends
        )
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{self.base}/ping", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"mlflow models serve did not start: see {directory / 'mlflow-serve.log'}")
            time.sleep(0.3)

    def in_process_ms(self, frame: pd.DataFrame, repeats: int = 100) -> dict:
        """Median milliseconds of one single-row prediction without any server: the pipeline's predict, and
        MLflow's pyfunc predict of the saved model (which checks the input against the signature first)."""
        import mlflow.pyfunc

        pyfunc = mlflow.pyfunc.load_model(str(self.model_dir))
        figures = {}
        for name, predict in (
            ("sklearn_pipeline_predict", self.pipeline.predict),
            ("mlflow_pyfunc_predict", pyfunc.predict),
        ):
            times = []
            for index in range(repeats):
                row = frame.iloc[[index % len(frame)]]
                started = time.perf_counter()
                predict(row)
                times.append(time.perf_counter() - started)
            figures[name] = round(float(np.median(times)) * 1000, 2)
        return figures

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        self.log.close()
