"""Issue 39, item 5, in a real browser: a path on scikit-learn's diabetes table whose selected step holds linear
terms only (FIRE's defaults within 14 terms, the issue's finding) says so on the job page in words, with the best
step that has a rule and its cost, and a link that opens that step; a path whose selected step has rules says
nothing of the kind.

The step named is recomputed here from the job's steps (the lowest validation loss among those with a rule within
the budget), and the cost in the sentence from their recorded losses. Screenshots at 1280x800 and 400 px wide under
test-artifacts/rule-step-dashboard/.
"""

import re

import pytest

from tests.support.browser import new_page, shoot, sign_in

BUDGET = 14
JOB = {"forest": {"random_state": 0}, "max_rules": BUDGET, "validation": {"fraction": 0.2, "seed": 0}}


def run(served, dataset_id: str, **settings) -> tuple[str, dict]:
    submitted = served.api.post("/v1/jobs", json={"dataset_id": dataset_id, **JOB, **settings})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    assert served.wait_for_job(job_id)["status"] == "succeeded"
    return job_id, served.api.get(f"/v1/jobs/{job_id}/result").json()


def test_a_selected_step_without_a_rule_is_said_in_words_with_a_link_to_the_best_step_with_one(served, browser):
    from playwright.sync_api import expect
    from sklearn.datasets import load_diabetes

    errors: list[str] = []
    page = new_page(browser, errors)
    base, api = served.base_url, served.api
    table = load_diabetes(as_frame=True).frame.to_csv(index=False).encode()
    dataset = api.post("/v1/datasets?target=target", content=table, headers={"Content-Type": "text/csv"}).json()
    job_id, result = run(served, dataset["id"])
    steps, selected = result["steps"], result["selected"]
    assert steps[selected]["n_rules"] == 0 and steps[selected]["n_linear"] > 0

    with_rules = [s for s in steps if s["n_rules"] >= 1 and s["n_terms"] <= BUDGET]
    best = min(with_rules, key=lambda s: (s["val_loss"], s["index"]))
    difference = best["val_loss"] - steps[selected]["val_loss"]
    percent = 100 * (best["val_loss"] / steps[selected]["val_loss"] - 1)

    sign_in(page, base, "/dashboard/jobs")
    page.goto(f"{base}/dashboard/jobs/{job_id}")
    note = page.locator("#rule-step")
    expect(note).to_be_visible(timeout=60_000)
    text = note.inner_text()
    assert text == f"{result['rule_step']['reason']} Show step {best['index']}, the best with a rule."
    found = re.search(
        rf"^The best step within {BUDGET} terms, step {selected}, uses only linear terms: step (\d+), the best with a "
        r"rule \((\d+) terms: (\d+) rules?, (\d+) linear terms?\), costs \+([\d.]+) validation loss \(\+([\d.]+)%\)\.",
        text,
    )
    assert found, text
    assert [int(found.group(k)) for k in range(1, 5)] == [best[f] for f in ("index", "n_terms", "n_rules", "n_linear")]
    assert float(found.group(5)) == pytest.approx(difference, rel=6e-4)
    assert float(found.group(6)) == pytest.approx(percent, abs=0.051)
    # the selected step's panel: its rules table says what predicts instead (it said "the intercept alone")
    expect(
        page.get_by_text("No rule: this step predicts with its linear terms (below) and the intercept.")
    ).to_be_visible()
    shoot(page, "rule-step-dashboard", "linear-only")

    note.get_by_role("link").click()  # the step with a rule opens below, its rules listed
    page.wait_for_url(f"{base}/dashboard/jobs/{job_id}/steps/{best['index']}")
    expect(page.locator("#step-title")).to_contain_text(f"Step {best['index']}")
    expect(page.locator("#step-facts dd[data-field='n_rules']")).to_have_text(str(best["n_rules"]))

    rules_job, rules_result = run(served, dataset["id"], linear_terms=False)  # rules only: the step chosen has some
    assert (
        rules_result["steps"][rules_result["selected"]]["n_rules"] >= 1 and rules_result["rule_step"]["reason"] is None
    )
    page.goto(f"{base}/dashboard/jobs/{rules_job}")
    expect(page.locator("#step-title")).to_contain_text(f"Step {rules_result['selected']}", timeout=60_000)
    expect(page.locator("#rule-step")).to_have_count(0)
    assert errors == []
