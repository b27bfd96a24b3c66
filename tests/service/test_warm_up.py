"""Preparing the solver (worker/main.py): compiled once per machine, and on a cold numba cache a worker takes jobs
before the warm-up ends (issue 31, item 6: two workers each compiled for minutes while the first job waited)."""

import logging
import sys
import threading
import time

import pytest

from tests.support.service import ServiceStack, make_settings
from worker import main


@pytest.fixture
def fake_solver(tmp_path, monkeypatch):
    """warm_solver as a 0.5 s compilation that writes its stamp, counted; the stamp (and so the lock) in tmp_path."""
    stamp = tmp_path / "fire-rules-warm-0123"
    monkeypatch.setattr(main, "warm_stamp", lambda: stamp)
    compiled = []

    def warm_solver():
        compiled.append(threading.current_thread().name)
        time.sleep(0.5)
        stamp.touch()

    monkeypatch.setattr(main, "warm_solver", warm_solver)
    return compiled


def test_a_second_warm_up_waits_for_the_first_and_does_not_compile(fake_solver):
    ran = {}

    def warm_up(name):
        ran[name] = main.warm_up_once()

    threads = [threading.Thread(target=warm_up, args=(name,), name=name) for name in ("first", "second")]
    for thread in threads:
        thread.start()
        time.sleep(0.1)  # the first holds the lock
    for thread in threads:
        thread.join(10)
    assert fake_solver == ["first"] and ran == {"first": True, "second": False}
    assert main.warm_up_once() is False and fake_solver == ["first"]  # a later start finds the stamp


def test_the_background_warm_up_is_loaded_once_after_its_child_ends(fake_solver, caplog):
    warm_up = main.BackgroundWarmUp([sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert not warm_up.ready_to_load()  # still running: the worker takes jobs meanwhile
    warm_up.process.wait(10)
    assert warm_up.ready_to_load()
    warm_up.load()
    assert fake_solver == [threading.current_thread().name] and not warm_up.ready_to_load()

    # another worker's child wrote the stamp: loaded without waiting for this worker's child (on the lock) to end
    waiting = main.BackgroundWarmUp([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert main.warm_stamp().exists() and waiting.ready_to_load()
    finally:
        waiting.process.kill()
        waiting.process.wait(10)

    main.warm_stamp().unlink()
    failed = main.BackgroundWarmUp([sys.executable, "-c", "raise SystemExit(3)"])
    failed.process.wait(10)
    with caplog.at_level(logging.WARNING, logger=main.__name__):
        assert not failed.ready_to_load() and not failed.ready_to_load()
    assert len(fake_solver) == 1 and "exited with 3" in caplog.text


def test_the_warm_up_stamp_lives_in_the_numba_cache_it_describes(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "a"))
    first = main.warm_stamp()
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "b"))
    second = main.warm_stamp()
    assert first.parent == tmp_path / "a" and second.parent == tmp_path / "b" and first.name != second.name


def test_a_compilation_into_another_numba_cache_is_not_waited_for(tmp_path, monkeypatch):
    """The compile lock is keyed as the stamp: a worker of another cache folder (or checkout) goes on."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "a"))
    entered = threading.Event()
    release = threading.Event()

    def other_cache():
        with main.one_compiler_at_a_time():
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=other_cache)
    holder.start()
    try:
        assert entered.wait(10)
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "b"))
        started = time.monotonic()
        with main.one_compiler_at_a_time():
            assert time.monotonic() - started < 1
    finally:
        release.set()
        holder.join(10)
    assert len(list(tmp_path.glob("*/fire-rules-compile-*.lock"))) == 2


def test_on_a_cold_cache_a_worker_takes_a_job_before_its_warm_up_ends(tmp_path):
    """An empty NUMBA_CACHE_DIR: the full warm-up takes minutes on 2 cores, yet the worker registers within
    seconds and its horse starts the queued job (compiling what that job needs) long before the warm-up ends."""
    with ServiceStack(make_settings(), n_workers=0) as stack:
        dataset = stack.upload_dataset(rows=400)
        started = time.monotonic()
        worker = stack.add_worker(env={"NUMBA_CACHE_DIR": str(tmp_path / "numba")})
        registered = time.monotonic() - started
        try:
            response = stack.client.post(
                "/v1/jobs",
                json={"dataset_id": dataset["id"], "forest": {"n_estimators": 10, "max_depth": 2}, "n_lambdas": 5},
            )
            assert response.status_code == 202, response.text
            running = stack.wait_for(response.json()["id"], ("running",), timeout=30)
            assert running["started_at"] is not None
            taken = time.monotonic() - started
            assert not list((tmp_path / "numba").glob("fire-rules-warm-*"))  # the warm-up has not ended yet
        finally:
            worker.kill()
        log = worker.process.stderr.read().decode()
        assert "numba's cache is cold" in log, log[-2000:]
        assert registered < 20, f"a worker took {registered:.1f} s to register on a cold cache"
        assert taken < 30, f"the first job started {taken:.1f} s after its worker"
