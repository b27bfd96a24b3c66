"""Smoke test of bench/near_identical_rules.py: what counts as near-identical, and one repetition of two halves of
a table of tests/data checked against the keys it counts."""

from pathlib import Path

import pytest

from bench import near_identical_rules as near
from solver.stability import dice

DATA_DIR = Path(__file__).resolve().parents[2] / "tests" / "data"


def key(*conditions):
    return frozenset(conditions)


def test_near_identical_rules_share_columns_directions_and_flags_with_cuts_at_most_one_apart():
    rule = key((0, ">", None, 4), (2, "<=", None, 7))
    assert near.near_identical(rule, key((0, ">", None, 5), (2, "<=", None, 6)))  # each one cut apart
    assert not near.near_identical(rule, key((0, ">", None, 6), (2, "<=", None, 7)))  # two cuts apart
    assert not near.near_identical(rule, key((0, "<=", None, 4), (2, "<=", None, 7)))  # another direction
    assert not near.near_identical(rule, key((0, ">", None, 4)))  # a condition fewer
    assert not near.near_identical(rule, key((0, ">", True, 4), (2, "<=", None, 7)))  # another missing flag


def test_near_dice_counts_a_rule_one_cut_from_the_other_set_s_as_shared():
    a = [key((0, ">", None, 4)), key((1, "<=", None, 2))]
    b = [key((0, ">", None, 5)), key((3, "<=", None, 2))]
    assert dice(set(a), set(b)) == 0.0
    assert near.near_dice(a, b) == pytest.approx(2 / 4)
    assert near.near_dice(a, a) == dice(set(a), set(a)) == 1.0
    assert near.near_dice([], []) == dice(set(), set()) == 1.0


def test_a_repetition_records_each_setting_s_rules_pairs_and_dice():
    records = near.run_table("stock", ["fire"], reps=1, data_dir=DATA_DIR, max_rows=300, log=print)
    (record,) = records
    assert record["variant"] == "fire" and len(record["rules"]) == 2
    assert all(0 <= same <= n_near <= rules * (rules - 1) / 2 for same, n_near, rules in
               zip(record["within_identical"], record["within_near"], record["rules"]))  # fmt: skip
    assert 0 <= record["dice_rules"] <= record["dice_rules_near"] <= 1
    summary = near.summarize(records)["fire"]
    assert summary["fits"] == 2 and summary["rules"] == sum(record["rules"])
    assert summary["dice_rules_near"] == record["dice_rules_near"]
