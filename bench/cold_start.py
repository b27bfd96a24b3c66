"""Cold start of `fire-rules serve` (a benchmark, not a test): seconds from launch until /healthz answers, until
/readyz answers 200 (jobs accepted), until a first small path job (abalone, 50 trees of depth 3) is submitted, until a
worker starts it (the job record's started_at) and until it is done.

Each run uses a fresh data directory (its own embedded Redis and two embedded workers) and the numba cache folder
given: run it twice on an empty folder for the cold and the warm figures. On a cold cache the workers take jobs at
once while one process compiles the whole solver in the background; the run then also waits until every worker has
loaded that warm-up (its log says "solver kernels loaded"), so that the next run starts warm. The service's log is
kept in the data directory (serve.log).

Usage: python bench/cold_start.py NUMBA_CACHE_DIR
Loopback only; the service is stopped with SIGTERM at the end.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from service import free_port, upload_abalone  # bench/service.py

REPO_ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    numba_cache = sys.argv[1]
    data_dir = tempfile.mkdtemp(prefix="fire-cold-start-")
    port = free_port()
    env = {key: value for key, value in os.environ.items() if not key.startswith("FIRE_")}
    env.update(NUMBA_CACHE_DIR=numba_cache, FIRE_DATA_DIR=data_dir, PYTHONPATH=str(REPO_ROOT))
    log_path = Path(data_dir) / "serve.log"
    log_file = open(log_path, "wb")  # noqa: SIM115 (open for the service's life)
    started, launched_at = time.monotonic(), time.time()
    service = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--port", str(port)],
        env=env,
        cwd=REPO_ROOT,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    seconds = {}

    def wait_until(name: str, condition, timeout: float = 600) -> None:
        while time.monotonic() - started < timeout:
            try:
                if condition():
                    seconds[name] = time.monotonic() - started
                    return
            except httpx.TransportError:  # not listening yet
                pass
            time.sleep(0.1)
        raise TimeoutError(name)

    try:
        wait_until("/healthz answers", lambda: http.get("/healthz").status_code == 200)
        wait_until("/readyz 200", lambda: http.get("/readyz").status_code == 200)
        dataset = upload_abalone(http)
        job = (
            http.post("/v1/jobs", json={"dataset_id": dataset["id"], "forest": {"n_estimators": 50, "max_depth": 3}})
            .raise_for_status()
            .json()
        )
        seconds["first job submitted"] = time.monotonic() - started
        wait_until(
            "first job done",
            lambda: http.get(f"/v1/jobs/{job['id']}").json()["status"] in ("succeeded", "failed", "canceled"),
        )
        record = http.get(f"/v1/jobs/{job['id']}").json()
        status = record["status"]
        if record.get("started_at"):
            seconds["first job started"] = record["started_at"] - launched_at
        log = log_path.read_text(errors="replace")
        if "numba's cache is cold" in log:
            wait_until(
                "every worker loaded the background warm-up",
                lambda: (
                    log_path.read_text(errors="replace").count("solver kernels loaded")
                    >= log.count("numba's cache is cold")
                ),
            )
        seconds = dict(sorted(seconds.items(), key=lambda item: item[1]))
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(60)
        log_file.close()
    print(
        f"cold start on {os.cpu_count()} cores, numba cache {numba_cache}: "
        + ", ".join(f"{name} {value:.1f} s" for name, value in seconds.items())
        + f" (job {status}; log {log_path})"
    )


if __name__ == "__main__":
    main()
