"""/metrics stays private (issue 38): with keys configured it needs one; a tenant's key reads its own series only
(fire_redis_up, its jobs, its models' drift), an operator's key (FIRE_METRICS_KEYS) every series; with no key
configured it is open as before. Two tenants train, promote and score a model each on the shared workers; every
scrape is parsed with prometheus_client's parser and no sample of one tenant reaches the other."""

import time
import uuid
from collections import Counter

import fakeredis
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.core.config import Settings
from app.core.container import build_core
from app.core.tenants import TenantKeys, parse_entry
from app.main import create_app
from tests.support.data import abalone_frame
from tests.support.drift import flush, records
from tests.support.problems import assert_problem
from tests.support.service import ServiceStack, make_settings

TENANTS = {"alice": "alice-secret", "bob": "bob-secret"}
OPERATOR = "ops-secret"
TENANT_FAMILIES = {"fire_redis_up", "fire_jobs", "fire_drift_rows", "fire_rule_firing_ratio", "fire_feature_psi"}
TENANT_FAMILIES |= {"fire_drifted"}
FRAME = abalone_frame().head(400)
SCORED_ROWS = {"alice": 60, "bob": 25}


def scrape(client, headers: dict) -> tuple[set[str], list[tuple[str, dict, float]]]:
    """The families of a /metrics answer and (family, labels, value) of each sample, read by prometheus_client."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.text
    families = list(text_string_to_metric_families(response.text))
    samples = [(family.name, sample.labels, sample.value) for family in families for sample in family.samples]
    return {family.name for family in families}, samples


def key(tenant: str) -> dict:
    return {"X-API-Key": TENANTS[tenant]}


@pytest.fixture(scope="module")
def keyed(stack):
    """The API with two tenants' keys and an operator's, on the shared stack's Redis, prefix and workers."""
    settings = make_settings(
        api_keys=[f"{tenant}={secret}" for tenant, secret in TENANTS.items()],
        metrics_keys=[f"ops={OPERATOR}"],
        queue_name=stack.settings.queue_name,
        key_prefix=stack.settings.key_prefix,
    )
    with ServiceStack(settings, n_workers=0, clean_keys=False) as own:
        yield own


@pytest.fixture(scope="module")
def models(keyed):
    """A model of each tenant (its name says whose), scored SCORED_ROWS[tenant] rows, the counts flushed."""
    client, token = keyed.client, uuid.uuid4().hex[:6]
    found = {}
    for tenant in TENANTS:
        csv = FRAME.to_csv(index=False).encode()
        upload = client.post(
            "/v1/datasets?target=rings", content=csv, headers={**key(tenant), "Content-Type": "text/csv"}
        )
        assert upload.status_code in (200, 201), upload.text
        body = {
            "dataset_id": upload.json()["id"],
            "forest": {"n_estimators": 20, "max_depth": 3, "max_features": "sqrt"},
            "n_lambdas": 5,
            "max_rules": 6,
        }
        job = client.post("/v1/jobs", json=body, headers=key(tenant))
        assert job.status_code == 202, job.text
        wait(client, job.json()["id"], tenant)
        name = f"{tenant}-secret-model-{token}"
        model = client.post("/v1/models", json={"job_id": job.json()["id"], "name": name}, headers=key(tenant))
        assert model.status_code == 201, model.text
        rows = records(FRAME.drop(columns=["rings"]).head(SCORED_ROWS[tenant]))
        scored = client.post(
            f"/v1/models/{model.json()['id']}/predict", json={"dataframe_records": rows}, headers=key(tenant)
        )
        assert scored.status_code == 200, scored.text
        found[tenant] = model.json()
    flush(keyed)
    return found


def wait(client, job_id: str, tenant: str) -> None:
    deadline = time.monotonic() + 120
    while (job := client.get(f"/v1/jobs/{job_id}", headers=key(tenant)).json())["status"] != "succeeded":
        assert job["status"] in ("queued", "running") and time.monotonic() < deadline, job
        time.sleep(0.1)


def test_metrics_need_a_key_once_keys_are_configured(keyed):
    client = keyed.client
    for headers in ({}, {"X-API-Key": "nope"}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic b3BzOng="}):
        problem = assert_problem(client.get("/metrics", headers=headers), 401, "header.X-API-Key")
        assert "FIRE_METRICS_KEYS" in problem["errors"][0]["fix"]
    # an operator's key reads /metrics and nothing else: no tenant's data
    assert_problem(client.get("/v1/datasets", headers={"Authorization": f"Bearer {OPERATOR}"}), 401, "X-API-Key")


def test_a_tenant_reads_its_own_series_and_the_operator_every_one(keyed, models):
    client = keyed.client
    operator_families, operator = scrape(client, {"Authorization": f"Bearer {OPERATOR}"})  # as Prometheus sends it
    seen: dict[str, list] = {}
    for tenant in TENANTS:
        families, samples = scrape(client, {"Authorization": f"Bearer {TENANTS[tenant]}"})
        assert sorted(map(repr, samples)) == sorted(map(repr, scrape(client, key(tenant))[1]))  # X-API-Key: the same
        seen[tenant] = samples
        assert families == TENANT_FAMILIES  # no HTTP traffic, no matrix cache
        assert {labels["tenant"] for _, labels, _ in samples if "tenant" in labels} == {tenant}
        model = models[tenant]
        ours = {"tenant": tenant, "model": model["name"], "version": "1"}
        assert ("fire_drift_rows", ours, SCORED_ROWS[tenant]) in samples
        assert ("fire_redis_up", {}, 1.0) in samples
        # fire_jobs: the tenant's own jobs by status, as GET /v1/jobs lists them to its key
        listed = Counter(job["status"] for job in client.get("/v1/jobs", headers=key(tenant)).json())
        jobs = {labels["status"]: value for family, labels, value in samples if family == "fire_jobs"}
        assert {status: count for status, count in jobs.items() if count} == dict(listed)
        # the model's series are those the operator reads
        mine = sorted(repr(sample) for sample in samples if sample[1].get("model") == model["name"])
        assert len(mine) > 1 and mine == sorted(repr(s) for s in operator if s[1].get("model") == model["name"])
    cross = [
        sample
        for tenant, samples in seen.items()
        for other in TENANTS
        if other != tenant
        for sample in samples
        if other in repr(sample)  # the other tenant's name, or its model's
    ]
    assert cross == []  # 0 cross-tenant reads
    assert operator_families >= {"fire_http_requests", "fire_matrix_cache", *TENANT_FAMILIES}
    assert {labels["tenant"] for _, labels, _ in operator if "tenant" in labels} >= set(TENANTS)


def fake_app(**settings) -> TestClient:
    config = Settings(redis_url="redis://fakeredis", key_prefix="metrics-keys:", queue_name="metrics", **settings)
    return TestClient(create_app(core=build_core(config, redis=fakeredis.FakeRedis())))


def test_without_keys_metrics_stay_open_and_an_operator_key_alone_closes_them():
    open_metrics = fake_app().get("/metrics")
    assert open_metrics.status_code == 200 and "fire_http_requests_total" in open_metrics.text
    client = fake_app(metrics_keys=f"ops={OPERATOR}")  # as FIRE_METRICS_KEYS reads from the environment
    assert_problem(client.get("/metrics"), 401, "header.X-API-Key")
    assert "fire_http_requests_total" in client.get("/metrics", headers={"X-API-Key": OPERATOR}).text
    assert client.get("/v1/losses").status_code == 200  # no tenant keys: the tenants' routes stay open


def test_a_key_is_a_tenants_or_an_operators_never_both():
    with pytest.raises(ValueError, match="FIRE_METRICS_KEYS"):
        TenantKeys([parse_entry("alice=same")], [parse_entry("ops=same")])
    with pytest.raises(ValueError, match="metrics key entry 2"):
        TenantKeys.from_settings(Settings(metrics_keys="ops=one,bad=", redis_url="redis://unused"))
    keys = TenantKeys([parse_entry("alice=a")], [parse_entry("ops=o")])
    assert (keys.tenant_of(b"a"), keys.operator_of(b"a"), keys.tenant_of(b"o"), keys.operator_of(b"o")) == (
        "alice",
        None,
        None,
        "ops",
    )
