"""Smoke test of bench/drift_self.py: the stock table of tests/data, as shipped and standardised, through the
bench's upload, training, profile and scoring body; the report says the target is met."""

from pathlib import Path

from app.core.config import Settings
from bench import drift_self

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


def test_the_stock_tables_own_rows_flag_nothing_and_the_report_says_so():
    results = [
        drift_self.measure(DATA_DIR / "stock.csv.gz", DATA_DIR, Settings(), standardised)
        for standardised in (False, True)
    ]
    for result in results:
        assert result["task"] == "regression" and result["rows"] == 950 and result["live_rows_equal_training"]
        after = result["after"]
        assert after["max_psi"] == 0.0 and after["flagged_columns"] == after["flagged_rules"] == []
        assert after["max_abs_log_ratio"] == 0.0
    assert results[1]["table"] == "stock (standardised)"
    report = drift_self.report(results, seconds=1.0)
    assert "**met**" in report and report.count("| stock") == 2
