"""Smoke test of bench/batch_scoring.py: the service (`fire-rules serve`, two workers) on the test Redis, a few
thousand rows instead of millions; the report's rows filled in, and the batch job's predictions equal to the
library's (the bench asserts it)."""

import os
import re

import pytest

from bench import batch_scoring

pytestmark = pytest.mark.integration


def test_the_report_gives_the_batch_and_in_process_times_and_the_workers_memory(tmp_path):
    redis = os.environ.get("FIRE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    out = tmp_path / "batch_scoring.md"
    report = batch_scoring.main(["--redis", redis, "--rows", "3000", "--big-rows", "5000", "--out", str(out)])
    assert out.read_text() == report
    assert re.search(
        r"\| 3,000 rows, Parquet upload to downloaded Parquet result \| <= 20 s \| \*\*[\d.]+ s\*\*", report
    )
    assert re.search(r"the service takes \*\*[\d.]+x\*\* as long; predictions equal to the bit", report)
    assert re.search(r"5,000-row Parquet file \(\d+ MiB\) \| < 1 GiB \| \*\*\d+ MiB\*\*", report)
