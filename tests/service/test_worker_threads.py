"""The solver's threads in the work horses RQ forks: every core by default, FIRE_NUM_THREADS where it is set, and no
hang, although the worker ran the solver's parallel loops before it forked (it warms the solver first)."""

import numba

from tests.support.jobs import submit


def _path_job(stack, abalone) -> dict:
    dataset, forest_id = abalone
    job = submit(stack, {"dataset_id": dataset["id"], "forest_id": forest_id, "n_lambdas": 10, "max_rules": 10})
    return stack.wait_for(job["id"], ("succeeded",), timeout=120)


def test_a_job_in_a_forked_work_horse_uses_every_core(stack, abalone):
    assert _path_job(stack, abalone)["threads"] == numba.config.NUMBA_DEFAULT_NUM_THREADS


def test_fire_num_threads_sets_the_threads_of_the_work_horse(idle_queue, abalone):
    idle_queue.add_worker(env={"FIRE_NUM_THREADS": "1"})
    assert _path_job(idle_queue, abalone)["threads"] == 1
