"""What a chunk job of a batch costs beside its rows (issue 38, item 5): the floor of rows per chunk
(FIRE_BATCH_MIN_CHUNK_ROWS) below which a chunk's own cost dominates. (How fast 10,000 chunks are submitted and
canceled: tests/service/test_batch_scale.py.)

On `fire-rules serve` with two workers (bench/service.py's Service, the floor lifted to 1 row), with the table and
model of bench/batch_scoring.py (20 columns, 16 rules):

- the cost of a chunk job besides its rows: ``--tiny-rows`` rows in chunks of one row, the worker seconds (two
  workers times the wall time from submission to the batch's end) per chunk;
- the cost of a row: ``--rows`` rows in chunks of 100,000, the worker seconds less that many chunk costs, per row;
- the floor: the rows whose scoring costs as much as one chunk job (cost per chunk / cost per row).

Usage: python bench/batch_chunk_overhead.py [--redis redis://127.0.0.1:6379/0] [--tiny-rows 2000]
       [--rows 1000000] [--out bench/results/batch_chunk_overhead.md]
Writes only under fresh key prefixes and queue names (Service), removed at the end.
"""

import argparse
import os
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.batch_scoring import parquet, promote, table
from bench.machine import cpu_model, git
from bench.service import Service

WORKERS = 2
BIG_CHUNK = 100_000


def batch_seconds(service: Service, model_id: str, body: bytes, chunk_rows: int) -> tuple[float, float, int]:
    """(seconds to the 202, seconds from the 202 to the batch's end, chunks) of a Parquet batch."""
    started = time.perf_counter()
    response = service.http.post(
        f"/v1/models/{model_id}/batch?chunk_rows={chunk_rows}",
        content=body,
        headers={"Content-Type": "application/vnd.apache.parquet"},
        timeout=600,
    )
    response.raise_for_status()
    submitted = time.perf_counter()
    job_id = response.json()["id"]
    while True:
        view = service.http.get(f"/v1/models/batch/{job_id}", timeout=60).json()
        if view["status"] in ("succeeded", "failed", "canceled"):
            break
        time.sleep(0.05)
    if view["status"] != "succeeded":
        raise RuntimeError(f"batch {job_id} {view['status']}: {view['error']}")
    return submitted - started, time.perf_counter() - submitted, view["batch"]["n_chunks"]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--tiny-rows", type=int, default=2_000)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    service = Service(args.redis, workers=WORKERS, env={"FIRE_BATCH_MIN_CHUNK_ROWS": "1"})
    try:
        model = promote(service)
        tiny_submit, tiny_wall, tiny_chunks = batch_seconds(service, model["id"], parquet(table(args.tiny_rows, 3)), 1)
        big_submit, big_wall, big_chunks = batch_seconds(service, model["id"], parquet(table(args.rows, 4)), BIG_CHUNK)
    finally:
        service.close()
    per_chunk = WORKERS * tiny_wall / tiny_chunks
    per_row = (WORKERS * big_wall - big_chunks * per_chunk) / args.rows
    floor = per_chunk / per_row
    lines = [
        "# The cost of a batch chunk job (issue 38, item 5)",
        "",
        f"`python bench/batch_chunk_overhead.py --tiny-rows {args.tiny_rows} --rows {args.rows}` at "
        f"{git('rev-parse', '--short', 'HEAD') or '?'}, load average {os.getloadavg()[0]:.1f} at the end, on "
        f"{cpu_model()} ({psutil.cpu_count()} cores), `fire-rules serve` with {WORKERS} workers on a local Redis; the "
        "table and model of bench/batch_scoring.py (20 columns, 16 rules), Parquet uploads.",
        "",
        "| | measured |",
        "|---|---|",
        f"| {args.tiny_rows:,} rows in chunks of 1 row | submitted in {tiny_submit:.2f} s, scored {tiny_wall:.2f} s "
        f"after: **{per_chunk * 1000:.0f} ms** of a worker per chunk job |",
        f"| {args.rows:,} rows in chunks of {BIG_CHUNK:,} | submitted in {big_submit:.2f} s, scored {big_wall:.2f} s "
        f"after: **{per_row * 1e6:.2f} µs** of a worker per row, the chunk jobs' own cost aside |",
        f"| rows whose scoring costs one chunk job | **{floor:,.0f}** |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return text


if __name__ == "__main__":
    main()
