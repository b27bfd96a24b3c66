"""Fixtures of the service tests: the API alone, the API with workers, queues of a test's own, and for the browser
tests the API served over HTTP with its workers and Debian's chromium (a module's own, each)."""

import pytest
from redis import Redis

from tests.support.browser import Served, launch_chromium
from tests.support.jobs import train_forest
from tests.support.service import ServiceStack, make_settings, remove_session_keys


@pytest.fixture(scope="session")
def api():
    """The API alone (no workers): for uploads, storage and error handling."""
    with ServiceStack(make_settings(), n_workers=0) as running:
        yield running


@pytest.fixture(scope="module")
def served():
    """The API on a loopback port with two workers and an API key, for one browser test module."""
    with Served() as running:
        yield running


@pytest.fixture(scope="module")
def browser():
    """Debian's headless chromium, for one browser test module."""
    with launch_chromium() as chromium:
        yield chromium


@pytest.fixture(scope="session")
def stack():
    """The API and two workers on one queue, shared by the service tests."""
    with ServiceStack(make_settings(), n_workers=2) as running:
        yield running


def _own_queue(stack: ServiceStack, name: str, n_workers: int):
    settings = stack.settings.model_copy(update={"queue_name": f"{stack.settings.queue_name}-{name}"})
    with ServiceStack(settings, n_workers=n_workers, clean_keys=False) as own:
        yield own
    remove_session_keys(stack.redis, settings.model_copy(update={"key_prefix": "no-such-prefix:"}))


@pytest.fixture
def own_queue(stack):
    """The shared stack's data on a queue of its own with one worker: for tests that kill workers."""
    yield from _own_queue(stack, "own", n_workers=1)


@pytest.fixture
def idle_queue(stack):
    """The shared stack's data on a queue that no worker serves: jobs stay queued."""
    yield from _own_queue(stack, "idle", n_workers=0)


@pytest.fixture
def isolated_settings():
    """Settings with a fresh prefix and queue for a test that starts and kills its own workers."""
    settings = make_settings()
    yield settings
    remove_session_keys(Redis.from_url(settings.redis_url), settings)


@pytest.fixture(scope="module")
def abalone(stack):
    """The abalone table uploaded and a small forest trained on it: (dataset, forest id)."""
    dataset = stack.upload_dataset()
    return dataset, train_forest(stack, dataset["id"])
