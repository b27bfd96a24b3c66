"""RQ job functions. Each takes (job id, attempt) only and loads everything else from storage.

A job reports through its record (status, progress, timings) and stores large results under its
own keys; the RQ return value stays empty.
"""
import os
import time
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from app.core.config import get_settings
from app.metrics import CACHE_HITS_FIELD, CACHE_MISSES_FIELD, stats_key
from app.services.container import Services, build_services
from app.services.forests import jsonable, train_ensemble
from app.services.jobs import rq_job_id
from app.services.job_records import ACTIVE, CANCELED, FAILED, QUEUED, RUNNING, SUCCEEDED, TERMINAL, now
from worker.matrix_cache import LeafMatrixCache

PROGRESS_INTERVAL_SECONDS = 0.1


@lru_cache(maxsize=1)
def services() -> Services:
    return build_services(get_settings())


class JobCanceled(Exception):
    pass


class JobRun:
    """Claims a queued job for one attempt, records its progress and its outcome."""

    def __init__(self, job_id: str, attempt: int):
        self.services = services()
        self.records = self.services.records
        self.job_id = job_id
        self.attempt = attempt
        self.timings: dict[str, float] = {}
        self.claimed = False
        self._last_progress = 0.0
        self.parent_pid = os.getppid()

    def __enter__(self) -> "JobRun":
        started = now()
        record = self.records.get(self.job_id)
        if record is None:
            return self
        self.record = record
        self.timings["queue_wait"] = max(0.0, started - record["queued_at"])
        self.deadline = started + self.services.settings.job_timeout
        self.claimed = self.records.transition(self.job_id, (QUEUED,), self.attempt, status=RUNNING,
                                               started_at=started, timings=self.timings,
                                               progress={"phase": "starting"})
        if self.claimed:
            self.records.beat(self.job_id, self.attempt)  # FireWorker keeps it fresh from here on
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self.claimed:
            return False
        self.records.redis.delete(self.records.heartbeat_key(self.job_id))
        if exc_type is JobCanceled:
            self.records.transition(self.job_id, ACTIVE, self.attempt, status=CANCELED, finished_at=now(),
                                    timings=self.timings, progress={"phase": "canceled"})
            return True
        if exc is not None:
            self.records.transition(self.job_id, (RUNNING,), self.attempt, status=FAILED, finished_at=now(),
                                    timings=self.timings,
                                    error={"type": exc_type.__name__, "detail": str(exc)})
        return False  # re-raise: RQ records the traceback too

    def phase(self, name: str, **progress) -> None:
        self.check_cancel()
        self.records.transition(self.job_id, (RUNNING,), self.attempt, progress={"phase": name, **progress},
                                timings=self.timings)

    @contextmanager
    def timed(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - started

    def check_cancel(self) -> None:
        if self.records.cancel_requested(self.job_id):
            raise JobCanceled()

    def on_step(self, step, n_steps: int, best: dict) -> bool:
        """Path callback: progress at most every PROGRESS_INTERVAL_SECONDS; truthy stops the path
        (canceled, past the deadline, or orphaned: the worker that forked this horse is gone and
        the job will run again elsewhere)."""
        if step.val_loss is not None and (best.get("val_loss") is None or step.val_loss < best["val_loss"]):
            best.update(step=step.index, val_loss=step.val_loss, n_rules=step.n_rules)
        if time.monotonic() - self._last_progress >= PROGRESS_INTERVAL_SECONDS:
            self.report_step(step, n_steps, best)
        return (self.records.cancel_requested(self.job_id) or time.time() > self.deadline
                or self.orphaned)

    def report_step(self, step, n_steps: int, best: dict) -> None:
        self._last_progress = time.monotonic()
        self.records.transition(self.job_id, (RUNNING,), self.attempt, progress={
            "phase": "path", "step": step.index + 1, "n_steps": n_steps, "n_rules": step.n_rules,
            "lambda_s": step.lambda_s, "train_loss": step.train_loss, "val_loss": step.val_loss,
            "best": dict(best)})

    @property
    def orphaned(self) -> bool:
        return os.getppid() != self.parent_pid

    def succeed(self, summary: dict, cache_hit: bool | None = None) -> None:
        self.timings["total"] = now() - self.record["queued_at"]
        self.records.transition(self.job_id, (RUNNING,), self.attempt, status=SUCCEEDED, finished_at=now(),
                                timings=self.timings, summary=summary, cache_hit=cache_hit,
                                progress={**self.records.get(self.job_id)["progress"], "phase": "done"})


def _load_or_train_forest(run: JobRun, spec: dict):
    """The job's forest; trains it here when a training job did not (or could not) store it first."""
    forests = run.services.forests
    if forests.find(spec["forest_id"]) is not None:
        with run.timed("load_forest"):
            return forests.load(spec["forest_id"])
    run.phase("training")
    dataset = run.services.datasets.get(spec["dataset_id"])
    with run.timed("load_data"):
        X, y = run.services.datasets.load_arrays(spec["dataset_id"])
    with run.timed("train"):
        ensemble = train_ensemble(X, y, spec["training"], dataset["feature_names"])
        forests.save(ensemble, spec["forest_id"], {"type": "training", "dataset_id": spec["dataset_id"],
                                                   "params": spec["training"]})
    return ensemble


def train_forest(job_id: str, attempt: int) -> None:
    with JobRun(job_id, attempt) as run:
        if not run.claimed:
            return
        spec = run.record["spec"]
        _load_or_train_forest(run, spec)
        forest = run.services.forests.get(spec["forest_id"])
        result = {"kind": "train", "job_id": job_id, "forest_id": spec["forest_id"], "forest": forest}
        run.services.blobs.put_json(run.records.result_key(job_id), result,
                                    ttl=run.services.settings.result_ttl_seconds)
        run.succeed({"forest_id": spec["forest_id"], "n_trees": forest["n_trees"], "n_leaves": forest["n_leaves"]})


def _split(n_rows: int, validation: dict) -> tuple[np.ndarray, np.ndarray]:
    order = np.random.default_rng(validation["seed"]).permutation(n_rows)
    n_val = int(round(n_rows * validation["fraction"]))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def run_path(job_id: str, attempt: int) -> None:
    from solver import LeafMatrix, fit_path

    with JobRun(job_id, attempt) as run:
        if not run.claimed:
            return
        spec = run.record["spec"]
        settings = run.services.settings
        forest = _load_or_train_forest(run, spec)
        run.phase("loading")
        with run.timed("load_data"):
            X, y = run.services.datasets.load_arrays(spec["dataset_id"])
            validation = spec["validation"]
            if validation["dataset_id"] is not None:
                X_val, y_val = run.services.datasets.load_arrays(validation["dataset_id"])
        run.phase("matrix")
        cache = LeafMatrixCache(run.services.cache_blobs, settings.key_prefix, settings.cache_ttl_seconds)
        leaves, cache_hit, run.timings["matrix_build"] = cache.leaves(forest, spec["forest_id"],
                                                                     spec["dataset_id"], X)
        if validation["dataset_id"] is not None:
            val_leaves, val_hit, seconds = cache.leaves(forest, spec["forest_id"], validation["dataset_id"], X_val)
            run.timings["matrix_build"] += seconds
            cache_hit = cache_hit and val_hit
            train_leaves, y_train = leaves, y
        else:
            train_rows, val_rows = _split(len(y), validation)
            train_leaves, y_train = leaves[train_rows], y[train_rows]
            val_leaves, y_val = leaves[val_rows], y[val_rows]

        run.services.redis.hincrby(stats_key(settings.key_prefix),
                                   CACHE_HITS_FIELD if cache_hit else CACHE_MISSES_FIELD)

        def matrix(leaf_indices):
            return LeafMatrix(leaves=np.ascontiguousarray(leaf_indices), values=forest.leaf_values,
                              offsets=forest.leaf_offsets)

        n_steps = len(spec["lambdas"]) if spec["lambdas"] else spec["n_lambdas"]
        best: dict = {}
        run.phase("path", step=0, n_steps=n_steps)
        with run.timed("path"):
            path = fit_path(matrix(train_leaves), y_train, penalty=spec["penalty"], gamma=spec["gamma"],
                            lambda_f=spec["lambda_f"], fusion_ratio=spec["fusion_ratio"], lambdas=spec["lambdas"],
                            n_lambdas=spec["n_lambdas"], lambda_min_ratio=spec["lambda_min_ratio"],
                            max_rules=spec["max_rules"], tol=spec["tol"], val_matrix=matrix(val_leaves),
                            y_val=y_val, leaf_ancestors=forest.leaf_ancestors,
                            callback=lambda step: run.on_step(step, n_steps, best))
        run.report_step(path.steps[-1], n_steps, best)
        run.check_cancel()
        if run.orphaned:
            run.claimed = False  # leave the record alone: the lost heartbeat gets the job run again
            return
        if time.time() > run.deadline:
            raise TimeoutError(f"the path passed FIRE_JOB_TIMEOUT={settings.job_timeout}s after "
                               f"{len(path.steps)} steps")
        with run.timed("store"):
            selected = path.select(spec["max_rules"])
            coefs = path.coef_path.tocsr()
            run.services.blobs.put_arrays(
                run.records.coefs_key(job_id), ttl=settings.result_ttl_seconds, data=coefs.data,
                indices=coefs.indices, indptr=coefs.indptr, intercepts=np.asarray(path.intercepts),
                n_leaves=np.asarray(forest.n_leaves))
            result = {
                "kind": "path", "job_id": job_id, "source_job_id": job_id, "dataset_id": spec["dataset_id"],
                "forest_id": spec["forest_id"], "parameters": spec, "lambda_max": path.lambda_max,
                "stop_reason": path.stop_reason, "n_train": int(len(y_train)), "n_val": int(len(y_val)),
                "cache_hit": cache_hit, "selected": selected,
                "steps": [jsonable(step.to_dict()) for step in path.steps],
            }
            run.services.blobs.put_json(run.records.result_key(job_id), result, ttl=settings.result_ttl_seconds)
        run.succeed(_path_summary(result), cache_hit=cache_hit)


def _path_summary(result: dict) -> dict:
    chosen = result["steps"][result["selected"]]
    return {"n_steps": len(result["steps"]), "selected": result["selected"], "n_rules": chosen["n_rules"],
            "val_loss": chosen["val_loss"], "train_loss": chosen["train_loss"], "stop_reason": result["stop_reason"]}


def collect_grid(job_id: str, attempt: int) -> None:
    """Parent of a grid: waits for every cell (re-queued behind retried ones), keeps the best by val loss."""
    with JobRun(job_id, attempt) as run:
        if not run.claimed:
            return
        jobs = run.services.jobs
        cells = [jobs.get(cell_id) for cell_id in run.record["cells"]]
        unfinished = [cell for cell in cells if cell["status"] not in TERMINAL]
        if unfinished:
            continuation = run.record.get("continuation", 0) + 1
            if run.records.transition(job_id, (RUNNING,), attempt, status=QUEUED, queued_at=now(),
                                      continuation=continuation,
                                      rq_job_id=rq_job_id(job_id, attempt, continuation),
                                      progress={"phase": "waiting for cells", "unfinished": len(unfinished)}):
                jobs.enqueue(run.records.get(job_id), depends_on=[cell["rq_job_id"] for cell in unfinished])
            run.claimed = False  # handed back to the queue, not finished
            return
        table = [{"job_id": c["id"], "gamma": c["spec"]["gamma"], "fusion_ratio": c["spec"]["fusion_ratio"],
                  "status": c["status"], **(c["summary"] or {})} for c in cells]
        done = [row for row in table if row["status"] == SUCCEEDED]
        if not done:
            raise RuntimeError("no grid cell succeeded: " + "; ".join(
                f"{c['id']}: {c['status']} {(c['error'] or {}).get('detail', '')}" for c in cells))
        best = min(done, key=lambda row: row["val_loss"] if row["val_loss"] is not None else row["train_loss"])
        result = {**run.services.jobs.result(best["job_id"]), "kind": "grid", "job_id": job_id,
                  "best_cell_id": best["job_id"], "grid": table}
        run.services.blobs.put_json(run.records.result_key(job_id), result,
                                    ttl=run.services.settings.result_ttl_seconds)
        run.succeed({**_path_summary(result), "best_cell_id": best["job_id"],
                     "best_gamma": best["gamma"], "best_fusion_ratio": best["fusion_ratio"]},
                    cache_hit=all(c["cache_hit"] for c in cells if c["status"] == SUCCEEDED))
