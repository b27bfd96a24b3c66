"""Single-row scoring under load on every scoring route of the FIRE service (wrk: saturating; locust: paced),
beside MLflow's own scoring server (`mlflow models serve`) of a comparable scikit-learn model on the same machine,
in the same run, with the same load tools and settings (a benchmark, not a test).

What it does:

1. starts the service as bench/load.py does (bench/service.py's `Service`: `fire-rules serve` with
   --api-processes uvicorn processes and one `fire-rules worker`, on the Redis given, under a fresh key prefix
   and queue removed at the end); uploads tests/data/abalone.csv.gz, runs bench/load.py's path job (a 30-tree
   forest of depth 3, 20 lambdas, at most 12 rules), promotes its selected step as name `scoring-load`
   (version 1) and points the alias `champion` at version 1;
2. fits the comparable scikit-learn model on the same table: a Pipeline of a OneHotEncoder for Sex and a
   RandomForestRegressor with the forest's own settings (the ensemble the rules are extracted from; numeric
   columns passed through), saves it with `mlflow.sklearn.save_model` (with its signature, so MLflow checks
   each request's schema as a real deployment does) and serves it with
   `mlflow models serve --env-manager local --workers N` (N = --api-processes, the same uvicorn process count
   as the service; both servers log at warning level, without access logs);
3. checks that every route answers the same first rows with 200 and the same predictions (the FIRE routes
   each other's, MLflow the pipeline's own); times --single-repeats requests per route from one client, the
   routes in turn (a request's cost without queueing); then for each route runs wrk (`-t THREADS -c CLIENTS -d SECONDS
   --timeout 5s`, after a short warm-up run whose figures are dropped) with a Lua script that cycles through
   512 different single-row bodies; first MLflow's empty GET /ping, not a scoring route but a yardstick of
   what uvicorn and FastAPI answer on this machine at the time. This is the saturating phase: the clients never
   pause, so it measures each server's throughput, and its latency is queueing (Little's law: mean latency =
   clients / throughput);
4. the paced phase, as internal apps call a model: for each route again, CLIENTS locust users (headless,
   `FastHttpUser`, `locust -f <generated locustfile> --headless -u CLIENTS -r CLIENTS -t PACED_SECONDS --csv ...`)
   each sending one single-row request every --pace-ms (`constant_throughput`; each user starts at a random
   phase of its period, as independent callers would, and cycles through the same 512 bodies): with 50 users
   and 100 ms, 500 requests/s offered in all. A server slower than that (MLflow's does about 40 a second on
   the 2-core machine) falls behind, and its users then wait on it as wrk's do: its achieved requests/s and
   latency are reported as they are. p50/p90/p99, requests and failures come from the "Aggregated" row of
   locust's `_stats.csv` table (whole milliseconds under 100 ms, two significant digits above), which the
   generated locustfile writes once more at the test's stop as `<prefix>_final_stats.csv` (locust rewrites its
   own file each second while the test runs, not at its end: it misses up to the last second);
5. writes a markdown report with both tables (paced: offered and achieved requests/s, p50, p90, p99, max,
   failures, target met?; saturating: one-client p50, requests/s, p50, p90, p99, errors) and a JSON with every
   figure, the load average around each run, versions and settings.

Target (issue 19): single-row scoring p99 < 50 ms with 50 clients and no errors on every scoring route, measured
with a standard load tool. It is checked on the paced phase (with at least 90% of the offered requests/s
achieved): in the saturating phase the latency is clients / throughput whatever a request costs (there even
MLflow's empty GET /ping has a p99 of hundreds of ms), so its p99s are reported, not judged.

Routes: /v1/models/{id}/predict; /v1/registered-models/{name}/predict, .../versions/{v}/predict,
.../aliases/{alias}/predict; .../aliases/{alias}/invocations (JSON and CSV); the Open Inference Protocol's
/v2/models/{name}/infer and /v2/models/{name}/versions/{version}/infer (run where the routes exist, reported as not
run otherwise); MLflow's /invocations (JSON split, records and CSV).

Usage: python bench/scoring_load.py [--redis redis://127.0.0.1:6379/0] [--clients 50] [--threads 2]
                                    [--seconds 15] [--warmup 3] [--api-processes 1] [--single-repeats 200]
                                    [--pace-ms 100] [--paced-seconds 15] [--no-paced] [--quick]
                                    [--out bench/results/scoring_load]
--quick: 3 s per route after a 1 s warm-up, 5 s paced runs, 50 one-client requests, and nothing written unless
--out is given. --no-paced: the saturating phase only (the target is then not checked).
Needs wrk on the PATH (`apt-get install wrk`), locust (`pip install locust`; run as `python -m locust`) and the
bench extras (mlflow-skinny). Loopback only; every process it starts is stopped at the end.
"""

import argparse
import csv
import datetime
import gzip
import importlib.metadata
import importlib.util
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import git  # bench/machine.py
from service import Service, free_port  # bench/service.py: the service under test, own prefix and queue

REPO_ROOT = Path(__file__).resolve().parents[1]
ABALONE = REPO_ROOT / "tests" / "data" / "abalone.csv.gz"
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "scoring_load"
FOREST = {"n_estimators": 30, "max_depth": 3, "max_features": "sqrt"}  # bench/load.py's
NAME, ALIAS = "scoring-load", "champion"
TARGET_P99_MS = 50.0
PACED_MIN_ACHIEVED = 0.9  # a paced run meets the target only at >= 90% of the offered requests/s
PACED_SETTLE_S = 2.0  # pause after each paced run: a server that fell behind answers what it still holds
N_BODIES = 512
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
    dataset = (
        http.post(
            "/v1/datasets?target=rings", content=ABALONE.read_bytes(), headers={"Content-Type": "application/gzip"}
        )
        .raise_for_status()
        .json()
    )
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


# ---------------------------------------------------------------------------------------------------------------
# the run


def check_routes(
    todo: list[Route], bases: dict, columns: list[str], rows: list[list], expected: dict[str, np.ndarray]
) -> list[Route]:
    """The routes that answer the first rows with 200 and the expected predictions; an optional route that is
    missing (404 or 405 of the router) is dropped with a note, anything else wrong stops the benchmark."""
    kept = []
    for route in todo:
        make, content_type = BODIES[route.body]
        if route.method == "GET":
            httpx.get(bases[route.server] + route.path, timeout=30).raise_for_status()
            kept.append(route)
            continue
        got = []
        for row in rows[:5]:
            response = httpx.post(
                bases[route.server] + route.path,
                content=make(columns, row),
                headers={"Content-Type": content_type},
                timeout=30,
            )
            if route.optional and response.status_code in (404, 405) and not got:
                route.result = {"skipped": f"route missing ({response.status_code})"}
                break
            if response.status_code != 200:
                raise RuntimeError(f"{route.label} ({route.body}): {response.status_code} {response.text[:400]}")
            got.extend(predictions_of(response.json()))
        if route.result.get("skipped"):
            print(f"- {route.label} ({route.body}): {route.result['skipped']}", file=sys.stderr)
            continue
        want = expected[route.server]
        if not np.allclose(got, want, rtol=1e-9, atol=1e-9):
            raise RuntimeError(f"{route.label} ({route.body}) predicted {got}, expected {list(want)}")
        kept.append(route)
    return kept


def single_client(runnable: list[Route], bases: dict, columns: list[str], rows: list[list], repeats: int) -> list:
    """Each route's median milliseconds with one client and nothing else of ours running: the routes in turn,
    round-robin, so that the machine's other load weighs on each alike."""
    clients = {server: httpx.Client(base_url=base, timeout=30) for server, base in bases.items()}
    times: list[list[float]] = [[] for _ in runnable]
    try:
        for k in range(repeats):
            row = rows[k % len(rows)]
            for index, route in enumerate(runnable):
                make, content_type = BODIES[route.body]
                client = clients[route.server]
                started = time.perf_counter()
                if route.method == "GET":
                    response = client.get(route.path)
                else:
                    response = client.post(
                        route.path, content=make(columns, row), headers={"Content-Type": content_type}
                    )
                times[index].append(time.perf_counter() - started)
                response.raise_for_status()
    finally:
        for client in clients.values():
            client.close()
    return [float(np.median(values)) * 1000 for values in times]


def git_commit() -> str:
    head, dirty = git("rev-parse", "--short", "HEAD"), git("status", "--porcelain", "--", "app", "solver", "worker")
    if head is None or dirty is None:
        return "unknown"
    return head + (" (with uncommitted changes in app/, solver/ or worker/)" if dirty else "")


def versions() -> dict:
    import fastapi
    import mlflow
    import sklearn
    import uvicorn

    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True)
    try:  # not imported here: importing locust monkey-patches the process with gevent
        locust_version = importlib.metadata.version("locust")
    except importlib.metadata.PackageNotFoundError:
        locust_version = "not installed"
    return {
        "python": platform.python_version(),
        "fastapi": fastapi.__version__,
        "uvicorn": uvicorn.__version__,
        "mlflow": mlflow.__version__,
        "scikit-learn": sklearn.__version__,
        "wrk": (wrk.stdout or wrk.stderr).splitlines()[0].strip() if (wrk.stdout or wrk.stderr) else "unknown",
        "locust": locust_version,
    }


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def whole(value: float | None) -> str:
    """locust's percentiles: whole milliseconds."""
    return "n/a" if value is None else f"{value:.0f}"


def paced_verdict(row: dict) -> str:
    paced = row["paced"]
    if paced["target_met"] is None:
        return "(calibration)"
    if row["server"] == "MLflow":
        return "(baseline)"
    if paced["target_met"]:
        return "yes"
    reasons = []
    if paced["p99_ms"] is None or paced["p99_ms"] >= TARGET_P99_MS:
        reasons.append("no p99" if paced["p99_ms"] is None else f"p99 {paced['p99_ms'] - TARGET_P99_MS:+.0f} ms")
    if paced["failures"]:
        reasons.append(f"{paced['failures']} failures")
    if paced["requests_per_s"] < PACED_MIN_ACHIEVED * paced["offered_per_s"]:
        reasons.append(f"{paced['requests_per_s']:.0f} of {paced['offered_per_s']:.0f} req/s")
    return f"**no** ({', '.join(reasons)})"


def cores_range(rows: list[dict], phase: str, key: str) -> str:
    values = [row[phase][key] for row in rows if phase in row and row[phase].get(key) is not None]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "?"


def markdown(report: dict) -> str:
    s = report["settings"]
    paced_run = s["paced"]
    offered = s["clients"] * 1000 / s["pace_ms"]
    calibration = next((r for r in report["routes"] if "skipped" not in r and r["method"] == "GET"), None)
    lines = [
        "# Single-row scoring under load: every FIRE scoring route beside MLflow's scoring server",
        "",
        f"`{report['command']}` ({report['date']}, commit {report['commit']}).",
        "",
        f"Every route in two phases, each request one row, cycling through {N_BODIES} abalone rows: saturating "
        f"(wrk, {s['clients']} clients that never pause)"
        + (
            f", then paced (locust, {s['clients']} clients each sending a request every {s['pace_ms']:g} ms)."
            if paced_run
            else " only (the paced phase was not run: --no-paced)."
        )
        + f" Both servers run on this machine ({report['machine']['cpus']} cores, shared with the load tool) with "
        f"{s['api_processes']} uvicorn process(es) each (the service's FIRE_API_WORKERS, `mlflow models serve "
        f"--workers`), both logging at warning level. Load average (1 min) before the first run "
        f"{report['machine']['loadavg_start'][0]:g}, after the last {report['machine']['loadavg_end'][0]:g}; "
        f"each run's is in the JSON.",
        "",
        f"- FIRE: `fire-rules serve` on Redis (fresh key prefix), model `{NAME}` v1 (alias `{ALIAS}`): "
        f"{report['fire_model']}.",
        f"- MLflow: `mlflow models serve --env-manager local` of {report['mlflow_model']}. Without a server, one "
        f"row costs {report['mlflow_model_in_process_ms'].get('sklearn_pipeline_predict', float('nan')):.1f} ms in "
        f"the pipeline's predict and "
        f"{report['mlflow_model_in_process_ms'].get('mlflow_pyfunc_predict', float('nan')):.1f} ms in MLflow's pyfunc "
        f"predict (median, in the benchmark's process, before the load).",
        "",
    ]
    ping = (
        f" (here even MLflow's empty `GET /ping` has a p99 of {calibration['saturating']['p99_ms']:.0f} ms at "
        f"{calibration['saturating']['requests_per_s']:.0f} req/s)"
        if calibration and calibration.get("saturating")
        else ""
    )
    little = (
        f"In the saturating phase the clients never pause, so by Little's law the mean latency is clients / "
        f"throughput whatever a request costs: p99 < {TARGET_P99_MS:g} ms with {s['clients']} such clients needs "
        f"well over {s['clients'] * 1000 / TARGET_P99_MS:,.0f} requests/s from cores that also run the load "
        f"tool{ping}; that phase measures throughput and queueing, and its p99s are shown as measured, not judged "
        f"against the target."
    )
    if paced_run:
        lines += [
            f"**Target** (issue 19): single-row scoring p99 < {TARGET_P99_MS:g} ms and no errors with "
            f"{s['clients']} clients on every scoring route, measured with a standard load tool. **It is checked on "
            f"the paced phase**: {s['clients']} clients each sending one row every {s['pace_ms']:g} ms "
            f"({offered:,.0f} requests/s offered in all), which is how internal apps call a model. " + little,
            "",
            f"## Paced phase (the target): {s['clients']} clients, one request each every {s['pace_ms']:g} ms (locust)",
            "",
            f"locust {report['versions'].get('locust', '?')} headless, {s['clients']} `FastHttpUser`s started at once "
            f"(`-u {s['clients']} -r {s['clients']}`), each at a random phase of its period, then "
            f"`constant_throughput({1000 / s['pace_ms']:g})` (a request every {s['pace_ms']:g} ms, the next one at "
            f"once when a request took longer), {s['paced_seconds']:g} s per route, 5 s timeout, after the "
            f"saturating phase (so warm). A route meets the target with p99 < {TARGET_P99_MS:g} ms, no failures and "
            f"at least {PACED_MIN_ACHIEVED:.0%} of the offered {offered:,.0f} requests/s achieved. A server slower "
            f"than the offered rate falls behind and its clients then wait on it as wrk's do: its achieved "
            f"requests/s and latency show it as it is. Percentiles as locust keeps them (whole ms under 100 ms, "
            f"two significant digits above), from the 'Aggregated' row of its `_stats.csv` table (written once "
            f"more at the test's stop: locust's own file, rewritten each second, misses the last one); "
            f"'1 client p50' as in the saturating table. locust itself used "
            f"{cores_range(report['routes'], 'paced', 'locust_cores')} of a core per run (its start included).",
            "",
            "| server | route | body | 1 client p50 ms | offered req/s | achieved req/s | p50 ms | p90 ms | p99 ms "
            "| max ms | failures | target met? |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in report["routes"]:
            if "skipped" in row:
                lines.append(
                    f"| {row['server']} | {row['route']} | {row['body']} | not run: {row['skipped']} | | | | | | | | |"
                )
                continue
            paced = row["paced"]
            lines.append(
                f"| {row['server']} | `{row['route']}` | {row['body']} | {ms(row['single_client_p50_ms'])} "
                f"| {paced['offered_per_s']:.0f} | {paced['requests_per_s']:.0f} | {whole(paced['p50_ms'])} "
                f"| {whole(paced['p90_ms'])} | {whole(paced['p99_ms'])} | {ms(paced['max_ms'])} | {paced['failures']} "
                f"| {paced_verdict(row)} |"
            )
        lines += ["", report["summary_paced"], ""]
    else:
        lines += [
            f"Target (issue 19): single-row scoring p99 < {TARGET_P99_MS:g} ms and no errors with {s['clients']} "
            f"clients on every scoring route. It applies to paced clients, and the paced phase was not run "
            f"(--no-paced): the target is not checked here. " + little,
            "",
        ]
    lines += [
        f"## Saturating phase: {s['clients']} clients that never pause (wrk): throughput and queueing",
        "",
        f"wrk, {s['clients']} connections, {s['threads']} threads, {s['seconds']:g} s per route after a "
        f"{s['warmup']:g} s warm-up whose figures are dropped, 5 s timeout. '1 client p50': the median of "
        f"{s['single_client_repeats']} requests per route from one client before the load (the routes in turn), "
        f"the cost of a request without queueing. wrk itself used "
        f"{cores_range(report['routes'], 'saturating', 'wrk_cores')} of a core per run.",
        "",
        f"| server | route | body | 1 client p50 ms | requests/s | p50 ms | p90 ms | p99 ms | errors "
        f"| p99 < {TARGET_P99_MS:g} ms? |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["routes"]:
        if "skipped" in row:
            lines.append(
                f"| {row['server']} | {row['route']} | {row['body']} | not run: {row['skipped']} | | | | | | |"
            )
            continue
        sat = row["saturating"]
        if sat["p99_under_target"] is None:
            under = "(calibration)"
        elif row["server"] == "MLflow":
            under = "(baseline)"
        else:
            under = "yes" if sat["p99_under_target"] else f"no ({sat['p99_ms'] - TARGET_P99_MS:+.1f} ms)"
        lines.append(
            f"| {row['server']} | `{row['route']}` | {row['body']} | {ms(row['single_client_p50_ms'])} "
            f"| {sat['requests_per_s']:.0f} "
            f"| {ms(sat['p50_ms'])} | {ms(sat['p90_ms'])} | {ms(sat['p99_ms'])} | {sat['errors']} | {under} |"
        )
    lines += ["", report["summary_saturating"], ""]
    return "\n".join(lines)


def side_by_side(results: list[dict]) -> list[tuple[dict, dict]]:
    """(FIRE row, MLflow row) per body MLflow takes: FIRE's /invocations of that body, else its first route."""
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    pairs = []
    for body in ("dataframe_split", "csv", "dataframe_records"):
        ours = next(
            (r for r in fire if r["body"] == body and "invocations" in r["route"]),
            next((r for r in fire if r["body"] == body), None),
        )
        theirs = next(
            (r for r in results if r["server"] == "MLflow" and r["body"] == body and "skipped" not in r), None
        )
        if ours and theirs:
            pairs.append((ours, theirs))
    return pairs


def not_run(results: list[dict]) -> str:
    skipped = [row for row in results if "skipped" in row]
    if not skipped:
        return ""
    return " Not run: " + "; ".join(f"{row['route']} ({row['skipped']})" for row in skipped) + "."


def summarize_paced(results: list[dict], offered: float) -> str:
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    met = [row for row in fire if row["paced"]["target_met"]]
    text = f"Paced, FIRE routes meeting the target: {len(met)}/{len(fire)}"
    if fire:
        worst = max(fire, key=lambda row: row["paced"]["p99_ms"] if row["paced"]["p99_ms"] is not None else 1e9)
        text += (
            f" (worst p99 {whole(worst['paced']['p99_ms'])} ms: {worst['route']}, {worst['body']}; "
            f"{sum(row['paced']['failures'] for row in fire)} failures in all)"
        )
    text += "."
    pairs = [
        f"{ours['body']}: FIRE `{ours['route'].split(' ')[1]}` {ours['paced']['requests_per_s']:.0f} req/s, p50 "
        f"{whole(ours['paced']['p50_ms'])} ms, p99 {whole(ours['paced']['p99_ms'])} ms, {ours['paced']['failures']} "
        f"failures; MLflow {theirs['paced']['requests_per_s']:.0f} req/s, p50 {whole(theirs['paced']['p50_ms'])} ms, "
        f"p99 {whole(theirs['paced']['p99_ms'])} ms, {theirs['paced']['failures']} failures"
        for ours, theirs in side_by_side(results)
    ]
    if pairs:
        text += f" Side by side at {offered:,.0f} req/s offered, " + "; ".join(pairs) + "."
    calibration = next((r for r in results if "skipped" not in r and r["method"] == "GET"), None)
    if calibration:
        paced = calibration["paced"]
        text += (
            f" Calibration: MLflow's `GET /ping` (no model, no body) {paced['requests_per_s']:.0f} req/s, p50 "
            f"{whole(paced['p50_ms'])} ms, p99 {whole(paced['p99_ms'])} ms at the same pace."
        )
    return text + not_run(results)


def summarize_saturating(results: list[dict]) -> str:
    fire = [row for row in results if row["server"] == "FIRE" and "skipped" not in row]
    under = [row for row in fire if row["saturating"]["p99_under_target"]]
    text = f"Saturating, FIRE routes with p99 < {TARGET_P99_MS:g} ms: {len(under)}/{len(fire)}"
    if fire:
        worst = max(fire, key=lambda row: row["saturating"]["p99_ms"])
        text += f" (worst p99 {worst['saturating']['p99_ms']:.1f} ms: {worst['route']}, {worst['body']})"
    text += "."
    pairs = [
        f"{ours['body']}: FIRE `{ours['route'].split(' ')[1]}` {ours['saturating']['requests_per_s']:.0f} req/s, p99 "
        f"{ours['saturating']['p99_ms']:.1f} ms; MLflow {theirs['saturating']['requests_per_s']:.0f} req/s, p99 "
        f"{theirs['saturating']['p99_ms']:.1f} ms "
        f"({ours['saturating']['requests_per_s'] / theirs['saturating']['requests_per_s']:.1f}x the throughput)"
        for ours, theirs in side_by_side(results)
    ]
    if pairs:
        text += " Side by side, " + "; ".join(pairs) + "."
    calibration = next((r for r in results if "skipped" not in r and r["method"] == "GET"), None)
    if calibration:
        sat = calibration["saturating"]
        text += (
            f" Calibration: MLflow's uvicorn answering `GET /ping` (no model, no body) {sat['requests_per_s']:.0f} "
            f"req/s, p50 {sat['p50_ms']:.1f} ms, p99 {sat['p99_ms']:.1f} ms under the same load."
        )
    return text + not_run(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--redis", default=os.environ.get("FIRE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))
    parser.add_argument(
        "--clients", type=int, default=50, help="clients: wrk connections (never pause), locust users (paced)"
    )
    parser.add_argument("--threads", type=int, default=2, help="wrk threads")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per route")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load per route before measuring")
    parser.add_argument(
        "--api-processes",
        type=int,
        default=1,
        help="uvicorn processes of each server (FIRE_API_WORKERS, mlflow models serve --workers)",
    )
    parser.add_argument(
        "--single-repeats", type=int, default=200, help="requests per route with one client, before the load"
    )
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=100.0,
        help="paced phase: each of the --clients locust users sends one request every this many ms",
    )
    parser.add_argument("--paced-seconds", type=float, default=15.0, help="paced phase: seconds per route")
    parser.add_argument("--no-paced", action="store_true", help="the saturating (wrk) phase only")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3 s per route after 1 s, 5 s paced runs, 50 one-client requests; writes nothing unless --out",
    )
    parser.add_argument("--out", type=Path, default=None, help=f"results prefix (.md, .json); default {DEFAULT_OUT}")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.warmup, args.single_repeats, args.paced_seconds = 3.0, 1.0, 50, 5.0
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not on the PATH (apt-get install wrk)")
    if not args.no_paced and importlib.util.find_spec("locust") is None:
        sys.exit("locust is not installed for this Python (pip install locust), or pass --no-paced")
    if args.pace_ms <= 0 or args.paced_seconds <= 0:
        sys.exit("--pace-ms and --paced-seconds must be positive")
    offered = args.clients * 1000 / args.pace_ms

    with gzip.open(ABALONE) as table:
        frame = pd.read_csv(table)
    target = frame.pop("rings")
    columns = list(frame.columns)
    sample = frame.sample(N_BODIES, random_state=0)
    rows = [
        [value.item() if hasattr(value, "item") else value for value in row] for row in sample.itertuples(index=False)
    ]

    started = datetime.datetime.now().astimezone()
    loadavg_start = loadavg()
    results: list[dict] = []
    in_process: dict = {}
    with tempfile.TemporaryDirectory(prefix="scoring-load-") as scratch:
        scratch_dir = Path(scratch)
        service = mlflow_server = None
        try:
            print("starting the service and training the model ...", file=sys.stderr)
            service = Service(args.redis, args.api_processes, workers=1)
            model_id, model = prepare_fire(service.http)
            print("fitting and serving the scikit-learn pipeline with mlflow ...", file=sys.stderr)
            mlflow_server = MlflowServer(frame, target, args.api_processes, scratch_dir)
            check_rows = pd.DataFrame(rows[:5], columns=columns)
            expected = {
                "FIRE": np.asarray(
                    predictions_of(
                        service.http.post(
                            f"/v1/models/{model_id}/predict",
                            json={"dataframe_split": {"columns": columns, "data": rows[:5]}},
                        )
                        .raise_for_status()
                        .json()
                    )
                ),
                "MLflow": mlflow_server.pipeline.predict(check_rows),
            }
            in_process = mlflow_server.in_process_ms(sample)
            bases = {"FIRE": service.base, "MLflow": mlflow_server.base}
            todo = routes(model_id)
            runnable = check_routes(todo, bases, columns, rows, expected)
            print("one client, the routes in turn ...", file=sys.stderr)
            alone = single_client(runnable, bases, columns, rows, args.single_repeats)
            for index, route in enumerate(runnable):
                make = BODIES[route.body][0]
                script = write_script(scratch_dir, index, route, [make(columns, row) for row in rows])
                print(f"{route.server} {route.path} ({route.body}) ...", file=sys.stderr)
                if args.warmup > 0:
                    run_wrk(bases[route.server], script, args.threads, args.clients, args.warmup)
                before = loadavg()
                figures = run_wrk(bases[route.server], script, args.threads, args.clients, args.seconds)
                errors = sum(figures[k] for k in ("connect", "read", "write", "status", "timeout"))
                p99 = figures["p99_us"] / 1000
                route.result = {
                    "requests": figures["requests"],
                    "requests_per_s": figures["requests"] / (figures["duration_us"] / 1e6),
                    "p50_ms": figures["p50_us"] / 1000,
                    "p90_ms": figures["p90_us"] / 1000,
                    "p99_ms": p99,
                    "p999_ms": figures["p999_us"] / 1000,
                    "mean_ms": figures["mean_us"] / 1000,
                    "max_ms": figures["max_us"] / 1000,
                    "errors": errors,
                    "error_kinds": {k: figures[k] for k in ("connect", "read", "write", "status", "timeout")},
                    "wrk_cpu_s": round(figures["tool_cpu_s"], 2),
                    "wrk_cores": round(figures["tool_cpu_s"] / (figures["duration_us"] / 1e6), 2),
                    # not the target (which applies to the paced phase): p99 < 50 ms in this closed loop
                    "p99_under_target": None if route.method == "GET" else bool(p99 < TARGET_P99_MS and errors == 0),
                    "loadavg_before": before,
                    "loadavg_after": loadavg(),
                }
                print(
                    f"  {route.result['requests_per_s']:.0f} req/s, p50 {route.result['p50_ms']:.1f} ms, "
                    f"p90 {route.result['p90_ms']:.1f} ms, p99 {p99:.1f} ms, errors {errors}",
                    file=sys.stderr,
                )
            if not args.no_paced:
                print(
                    f"paced: {args.clients} locust users, a request each every {args.pace_ms:g} ms "
                    f"({offered:,.0f}/s offered), {args.paced_seconds:g} s per route ...",
                    file=sys.stderr,
                )
            for index, route in enumerate(runnable if not args.no_paced else []):
                make = BODIES[route.body][0]
                locustfile = write_locustfile(
                    scratch_dir, index, route, [make(columns, row) for row in rows], args.pace_ms
                )
                print(f"{route.server} {route.path} ({route.body}) paced ...", file=sys.stderr)
                before = loadavg()
                figures = run_locust(
                    bases[route.server],
                    locustfile,
                    args.clients,
                    args.paced_seconds,
                    scratch_dir / f"paced{index}",
                )
                after = loadavg()
                time.sleep(PACED_SETTLE_S)
                p99 = figures["p99_ms"]
                route.paced = {
                    "offered_per_s": offered,
                    **figures,
                    "target_met": None
                    if route.method == "GET"
                    else bool(
                        p99 is not None
                        and p99 < TARGET_P99_MS
                        and figures["failures"] == 0
                        and figures["requests_per_s"] >= PACED_MIN_ACHIEVED * offered
                    ),
                    "loadavg_before": before,
                    "loadavg_after": after,
                }
                print(
                    f"  {figures['requests_per_s']:.0f} of {offered:.0f} req/s, p50 {whole(figures['p50_ms'])} ms, "
                    f"p90 {whole(figures['p90_ms'])} ms, p99 {whole(p99)} ms, failures {figures['failures']}",
                    file=sys.stderr,
                )
            results = []
            for r in todo:
                if not r.result:
                    continue
                row = {"server": r.server, "route": r.label, "path": r.path, "body": r.body, "method": r.method}
                if "skipped" in r.result:
                    results.append({**row, **r.result})
                    continue
                row["single_client_p50_ms"] = alone[runnable.index(r)]
                row["saturating"] = r.result
                if r.paced:
                    row["paced"] = r.paced
                results.append(row)
        finally:
            if mlflow_server is not None:
                mlflow_server.close()
            if service is not None:
                service.close()

    metrics = model.get("metrics") or {}
    report = {
        "command": " ".join(["python bench/scoring_load.py", *sys.argv[1:]]),
        "date": started.isoformat(timespec="seconds"),
        "commit": git_commit(),
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "loadavg_start": loadavg_start,
            "loadavg_end": loadavg(),
        },
        "settings": {
            "clients": args.clients,
            "threads": args.threads,
            "seconds": args.seconds,
            "warmup": args.warmup,
            "api_processes": args.api_processes,
            "rows_cycled": N_BODIES,
            "single_client_repeats": args.single_repeats,
            "wrk_timeout_s": 5,
            "paced": not args.no_paced,
            "pace_ms": args.pace_ms,
            "paced_seconds": args.paced_seconds,
            "paced_offered_per_s": offered,
            "paced_min_achieved_fraction": PACED_MIN_ACHIEVED,
            "locust_timeout_s": 5,
            "target_p99_ms": TARGET_P99_MS,
            "target_checked_on": None if args.no_paced else "paced",
        },
        "versions": versions(),
        "fire_model": (
            f"abalone, a path job on a {FOREST['n_estimators']}-tree forest of depth {FOREST['max_depth']} "
            f"(20 lambdas, at most 12 rules), its selected step: {model.get('n_rules', '?')} rules"
            + (f", {model.get('n_linear')} linear terms" if model.get("n_linear") else "")
        ),
        "fire_model_metrics": metrics,
        "mlflow_model": (
            f"a scikit-learn Pipeline (OneHotEncoder of Sex, other columns passed through, "
            f"RandomForestRegressor({', '.join(f'{k}={v!r}' for k, v in FOREST.items())}) - the forest the "
            f"rules come from) on the same abalone table, saved by mlflow.sklearn.save_model with its signature"
        ),
        "mlflow_model_in_process_ms": in_process,
        "routes": results,
    }
    report["summary_saturating"] = summarize_saturating(results)
    if not args.no_paced:
        report["summary_paced"] = summarize_paced(results, offered)
    text = markdown(report)
    print(text)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(text)
        out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
        print(f"written: {out.with_suffix('.md')}, {out.with_suffix('.json')}", file=sys.stderr)


if __name__ == "__main__":
    main()
