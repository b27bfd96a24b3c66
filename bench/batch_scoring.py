"""Batch scoring on the service (issue 31, part 3): a 20-column table's rows scored by a batch job on `fire-rules
serve` with two workers, against the same rows scored in this process with the library (the model's TableEncoding,
then RuleEnsemble.predict), in one run; and the peak memory of the workers (RSS of each worker process and of the
work horses it forks, sampled every 50 ms from /proc) while a 10-million-row Parquet file is scored.

Targets (issue 31): 1 million rows in <= 20 s on the 2-core machine (two workers); peak worker RSS < 1 GiB for a
10-million-row Parquet file.

Usage: python bench/batch_scoring.py [--redis redis://127.0.0.1:6379/0] [--rows 1000000] [--big-rows 10000000]
       [--out bench/results/batch_scoring.md]
Writes only under a fresh key prefix and queue name (bench/service.py's Service), removed at the end.
"""

import argparse
import io
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.machine import cpu_model, gib, git, solver_commit
from bench.service import Service
from solver import RuleEnsemble
from solver.encoding import TableEncoding

N_NUMERIC, LEVELS = 18, {"region": ["north", "south", "east", "west"], "plan": ["basic", "plus", "pro"]}
TRAIN_ROWS = 20_000
FOREST = {"n_estimators": 100, "max_depth": 3, "random_state": 0}
GENERATE_ROWS = 1_000_000  # rows generated (and written) at a time


def table(rows: int, seed: int) -> pd.DataFrame:
    """18 numeric columns (values with three decimals, as measured data has) and two text columns."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{j}": rng.integers(0, 1000, rows) / 1000 for j in range(N_NUMERIC)})
    for name, levels in LEVELS.items():
        frame[name] = np.asarray(levels, dtype=object)[rng.integers(0, len(levels), rows)]
    return frame


def target(frame: pd.DataFrame, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (
        3 * frame["x0"]
        + 2 * (frame["x1"] > 0.5) * frame["x2"]
        + (frame["region"] == "north")
        - (frame["plan"] == "pro") * frame["x3"]
        + rng.normal(0, 0.1, len(frame))
    ).to_numpy()


def parquet(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer, row_group_size=100_000)
    return buffer.getvalue()


def write_big_parquet(path: Path, rows: int) -> None:
    writer = None
    for start in range(0, rows, GENERATE_ROWS):
        part = pa.Table.from_pandas(table(min(GENERATE_ROWS, rows - start), seed=start + 7), preserve_index=False)
        writer = writer or pq.ParquetWriter(path, part.schema)
        writer.write_table(part, row_group_size=100_000)
    assert writer is not None
    writer.close()


class WorkerMemory:
    """Samples the memory of the worker processes and of their children (the forked work horses) every 100 ms: the
    largest RSS of one process, and the largest PSS of a worker with its horse (a horse shares its parent's pages:
    their RSS would count those twice, PSS splits them between the two)."""

    def __init__(self, pids: list[int]):
        self.workers = [psutil.Process(pid) for pid in pids]
        self.peak_process = 0  # the largest RSS of one process (a worker or a horse)
        self.peak_worker = 0  # the largest PSS of a worker plus its horse at one sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WorkerMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for worker in self.workers:
                try:
                    processes = [worker, *worker.children(recursive=True)]
                    sizes = [(process.memory_info().rss, _pss(process.pid)) for process in processes]
                except (psutil.Error, OSError):
                    continue
                self.peak_process = max(self.peak_process, *(rss for rss, _ in sizes))
                self.peak_worker = max(self.peak_worker, sum(pss for _, pss in sizes))


def _pss(pid: int) -> int:
    """A process's proportional set size from /proc/{pid}/smaps_rollup (the kernel sums it: cheap to sample)."""
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    return 0


def promote(service: Service) -> dict:
    frame = table(TRAIN_ROWS, seed=1)
    frame["y"] = target(frame, seed=2)
    dataset = service.upload(frame.to_csv(index=False).encode(), "y")
    job, _ = service.run_job({"dataset_id": dataset["id"], "forest": FOREST, "n_lambdas": 30, "max_rules": 20})
    response = service.http.post("/v1/models", json={"job_id": job["id"], "name": "bench-batch"})
    response.raise_for_status()
    return response.json()


def run_batch(service: Service, model_id: str, content, content_type: str, out: Path | None = None) -> dict:
    """Submit, wait, download: the seconds of each and the downloaded bytes (to ``out``, or kept)."""
    started = time.perf_counter()
    response = service.http.post(
        f"/v1/models/{model_id}/batch", content=content, headers={"Content-Type": content_type}, timeout=600
    )
    response.raise_for_status()
    submitted = time.perf_counter()
    job_id = response.json()["id"]
    while True:
        view = service.http.get(f"/v1/models/batch/{job_id}").json()
        if view["status"] in ("succeeded", "failed", "canceled"):
            break
        time.sleep(0.02)
    if view["status"] != "succeeded":
        raise RuntimeError(f"batch {job_id} {view['status']}: {view['error']}")
    scored = time.perf_counter()
    data = b""
    with service.http.stream("GET", f"/v1/models/batch/{job_id}/result", timeout=600) as result:
        result.raise_for_status()
        if out is None:
            data = result.read()
        else:
            with out.open("wb") as sink:
                for part in result.iter_bytes():
                    sink.write(part)
    done = time.perf_counter()
    return {
        "job": view,
        "submit": submitted - started,
        "score": scored - submitted,
        "download": done - scored,
        "total": done - started,
        "data": data,
    }


def main(argv: list[str] | None = None) -> str:
    """Run the benchmark; the report (markdown), also written to ``--out`` where given."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--big-rows", type=int, default=10_000_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    service = Service(args.redis, workers=2)
    lines: list[str] = []
    try:
        model = promote(service)
        print(f"model {model['id']}: {len(model['ensemble']['rules'])} rules", flush=True)
        worker_pids = [process.pid for process in service.processes[1:]]

        frame = table(args.rows, seed=3)
        body = parquet(frame)
        with WorkerMemory(worker_pids) as memory:
            served = run_batch(service, model["id"], body, "application/vnd.apache.parquet")
        predictions = pq.read_table(io.BytesIO(served["data"])).column("prediction").to_numpy()

        started = time.perf_counter()
        encoding = TableEncoding.from_dict(model["columns"])
        X = encoding.encode_frame(frame[encoding.column_names])
        library = RuleEnsemble.from_dict(model["ensemble"]).predict(X)
        in_process = time.perf_counter() - started
        assert np.array_equal(predictions, library), "the batch job's predictions differ from the library's"
        ratio = served["total"] / in_process
        print(
            f"{args.rows:,} rows: batch job {served['total']:.2f} s (submit {served['submit']:.2f}, score "
            f"{served['score']:.2f}, download {served['download']:.2f}); in-process {in_process:.2f} s; "
            f"ratio {ratio:.1f}x; worker peak {gib(memory.peak_worker)}",
            flush=True,
        )

        with tempfile.TemporaryDirectory() as directory:
            big = Path(directory) / "big.parquet"
            write_big_parquet(big, args.big_rows)
            size = big.stat().st_size
            print(f"{args.big_rows:,}-row Parquet file written: {size / 2**20:.0f} MiB", flush=True)
            with WorkerMemory(worker_pids) as big_memory, big.open("rb") as content:
                scored = run_batch(
                    service, model["id"], content, "application/vnd.apache.parquet", Path(directory) / "out.parquet"
                )
                rows_out = pq.ParquetFile(Path(directory) / "out.parquet").metadata.num_rows
            assert rows_out == args.big_rows
            print(
                f"{args.big_rows:,} rows: {scored['total']:.1f} s (submit {scored['submit']:.1f}, score "
                f"{scored['score']:.1f}, download {scored['download']:.1f}); worker peak PSS "
                f"{gib(big_memory.peak_worker)} (RSS of one process {gib(big_memory.peak_process)})",
                flush=True,
            )

        lines = [
            "# Batch scoring (issue 31, part 3)",
            "",
            f"`python bench/batch_scoring.py --rows {args.rows} --big-rows {args.big_rows}` at "
            f"{git('rev-parse', '--short', 'HEAD') or '?'} (solver {solver_commit() or '?'}), load average "
            f"{os.getloadavg()[0]:.1f} at the end, on {cpu_model()} ({psutil.cpu_count()} cores), `fire-rules serve` "
            f"with two workers on a local Redis; a {N_NUMERIC + len(LEVELS)}-column table ({N_NUMERIC} numeric, "
            f"{len(LEVELS)} text), a model of {len(model['ensemble']['rules'])} rules from {FOREST['n_estimators']} "
            f"trees of depth {FOREST['max_depth']}; chunks of 100,000 rows (FIRE_BATCH_CHUNK_ROWS).",
            "",
            "| | target | measured |",
            "|---|---|---|",
            f"| {args.rows:,} rows, Parquet upload to downloaded Parquet result | <= 20 s | "
            f"**{served['total']:.2f} s** (submit and split {served['submit']:.2f}, chunk jobs "
            f"{served['score']:.2f}, download {served['download']:.2f}) |",
            f"| the same rows in this process (TableEncoding.encode_frame + RuleEnsemble.predict) | | "
            f"{in_process:.2f} s: the service takes **{ratio:.1f}x** as long; predictions equal to the bit |",
            f"| peak worker memory (PSS of a worker and its work horse), {args.big_rows:,}-row Parquet file "
            f"({size / 2**20:.0f} MiB) | < 1 GiB | **{gib(big_memory.peak_worker)}** (RSS of one process at most "
            f"{gib(big_memory.peak_process)}); the file scored in {scored['total']:.1f} s (submit and split "
            f"{scored['submit']:.1f}, chunk jobs {scored['score']:.1f} after it, download {scored['download']:.1f}) |",
            f"| peak worker memory (PSS), {args.rows:,} rows | | {gib(memory.peak_worker)} (RSS of one process at "
            f"most {gib(memory.peak_process)}) |",
            "",
        ]
    finally:
        service.close()
    text = "\n".join(lines)
    print(text)
    if args.out is not None and lines:
        args.out.write_text(text)
    return text


if __name__ == "__main__":
    main()
