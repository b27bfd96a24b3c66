"""The parallel kernels (solver._tree_kernels, the full gradients, solver.threads): the same bits for every
thread count, sums that match a reference, a path that does not depend on ``n_jobs``, and a threading layer that
survives fork and concurrent threads."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor

from solver import TreeEnsemble, fit_path, leaf_matrix, threads
from solver._tree_kernels import ROW_CHUNK, column_sums
from solver.candidates import Candidates, LinearTerms
from solver.problem import sort_rows_by_leaf
from tests.support.data import REPO_ROOT

N_ROWS = 4 * ROW_CHUNK + 123  # five chunks of rows, the last one short
two_threads = pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two threads")


@pytest.fixture(scope="module")
def friedman():
    X, y = make_friedman1(n_samples=N_ROWS, n_features=10, noise=1.0, random_state=0)
    forest = RandomForestRegressor(n_estimators=30, max_depth=4, random_state=0).fit(X[:3000], y[:3000])
    return TreeEnsemble.from_sklearn(forest), X, (y - y.mean()) / y.std()


def _in_threads(n_jobs, function, *args):
    with threads.limit(n_jobs):
        return function(*args)


def _column_sums(leaves, offsets, values):
    out = np.empty(offsets[-1])
    column_sums(leaves, offsets, values, out)
    return out


def test_column_sums_match_a_reference_and_skip_rows_in_no_column():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 9, size=40)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    leaves = rng.integers(0, 9, size=(N_ROWS, 40)).astype(np.uint8)
    leaves[rng.random(leaves.shape) < 0.2] = 255  # the no-column mark
    values = rng.standard_normal(N_ROWS)
    present = leaves < sizes
    reference = np.zeros(offsets[-1])
    columns = (offsets[:-1] + leaves.astype(np.int64))[present]
    np.add.at(reference, columns, np.broadcast_to(values[:, None], leaves.shape)[present])
    np.testing.assert_allclose(_column_sums(leaves, offsets, values), reference, rtol=1e-12, atol=1e-12)


@two_threads
def test_every_row_kernel_gives_the_same_bits_for_one_and_two_threads(friedman):
    forest, X, y = friedman
    one = _in_threads(1, forest.apply, X)
    np.testing.assert_array_equal(_in_threads(2, forest.apply, X), one)
    matrix = leaf_matrix(forest, X)
    w = np.random.default_rng(1).standard_normal(matrix.shape[1])
    for kernel, args in (
        (matrix.matvec, (w,)),
        (matrix.rmatvec, (y,)),
        (_column_sums, (matrix.leaves, matrix.offsets, y)),
        (forest.predict, (X,)),
    ):
        np.testing.assert_array_equal(_in_threads(2, kernel, *args), _in_threads(1, kernel, *args))
    sorted_one = _in_threads(1, sort_rows_by_leaf, matrix.leaves, matrix.offsets)
    for ours, theirs in zip(_in_threads(2, sort_rows_by_leaf, matrix.leaves, matrix.offsets), sorted_one):
        np.testing.assert_array_equal(ours, theirs)


def test_rows_by_leaf_are_the_stable_sort_of_each_block(friedman):
    forest, X, _ = friedman
    matrix = leaf_matrix(forest, X[:5000])
    leaf_rows, leaf_ptr = sort_rows_by_leaf(matrix.leaves, matrix.offsets)
    for t in (0, 7, matrix.leaves.shape[1] - 1):
        columns = matrix.leaves[:, t].astype(np.int64)
        first, last = matrix.offsets[t], matrix.offsets[t + 1]
        np.testing.assert_array_equal(leaf_rows[leaf_ptr[first] : leaf_ptr[last]], np.argsort(columns, kind="stable"))
        np.testing.assert_array_equal(np.diff(leaf_ptr[first : last + 1]), np.bincount(columns, minlength=last - first))


@two_threads
@pytest.mark.parametrize(
    ("loss", "candidates"),
    [("squared", "leaves"), ("logistic", "nodes"), ("poisson", "leaves"), ("multinomial", "leaves")],
)
def test_a_path_does_not_depend_on_n_jobs(friedman, loss, candidates):
    forest, X, y = friedman
    target = {
        "squared": y,
        "logistic": (y > 0).astype(float),
        "poisson": np.round(np.exp(y)),
        "multinomial": np.digitize(y, [-0.5, 0.5]).astype(float),
    }[loss]
    linear = LinearTerms.fit(X, np.arange(X.shape[1]), 0.025) if candidates == "nodes" else None
    terms = Candidates.of(forest, candidates, 2 if candidates == "nodes" else None, linear)
    matrix = terms.matrix(forest.apply(X), X)
    settings = dict(loss=loss, n_lambdas=12, max_rules=15, polish=False)
    one = fit_path(matrix, target, n_jobs=1, **settings)
    two = fit_path(matrix, target, n_jobs=2, **settings)
    assert (one.coef_path != two.coef_path).nnz == 0
    np.testing.assert_array_equal(one.intercepts, two.intercepts)
    assert [step.objective for step in one.steps] == [step.objective for step in two.steps]


def test_n_jobs_reads_as_scikit_learn_reads_it():
    pool = numba.config.NUMBA_NUM_THREADS
    assert threads.count(None) == threads.count(-1) == pool
    assert threads.count(1) == 1
    assert threads.count(10_000) == pool
    assert threads.count(-10_000) == 1
    for wrong in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="n_jobs"):
            threads.count(wrong)
    with threads.limit(1):
        assert threads.current() == 1
    assert threads.current() == pool


def _python(code: str, **env) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("FIRE_", "NUMBA_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**environment, **env, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


PARALLEL_LOOP = """
import numpy as np
import solver, numba
from solver._tree_kernels import column_sums
def loop():
    out = np.empty(8)
    column_sums(np.zeros((50_000, 4), np.uint8), np.arange(0, 10, 2), np.ones(50_000), out)
    return out[0]
"""


def test_fire_num_threads_sizes_the_pool_and_a_wrong_value_is_named():
    ran = _python(
        PARALLEL_LOOP + "loop(); print(numba.get_num_threads(), numba.threading_layer())", FIRE_NUM_THREADS="1"
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1", "tbb"]
    wrong = _python("import solver", FIRE_NUM_THREADS="many")
    assert wrong.returncode != 0
    assert "FIRE_NUM_THREADS must be a positive number of threads, got 'many'" in wrong.stderr


def test_a_child_forked_after_parallel_loops_runs_them_too_and_so_do_concurrent_threads():
    code = (
        PARALLEL_LOOP
        + """
import os
from concurrent.futures import ThreadPoolExecutor
assert loop() == 50_000
pid = os.fork()
if pid == 0:
    os._exit(0 if loop() == 50_000 else 1)
_, status = os.waitpid(pid, 0)
with ThreadPoolExecutor(4) as pool:
    sums = list(pool.map(lambda _: loop(), range(16)))
print(os.waitstatus_to_exitcode(status), sums == [50_000.0] * 16)
"""
    )
    ran = _python(code)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["0", "True"]


def test_selected_columns_are_those_of_the_explicit_matrix_in_the_order_asked(friedman):
    forest, X, _ = friedman
    linear = LinearTerms.fit(X, np.arange(X.shape[1]), 0.025)
    terms = Candidates.of(forest, "nodes", 3, linear)
    matrix = terms.matrix(forest.apply(X), X)
    explicit = matrix.to_csc()
    rng = np.random.default_rng(2)
    selected = rng.choice(matrix.shape[1], size=40, replace=False)
    selected[:3] = [matrix.n_rules + 1, 0, matrix.shape[1] - 1]  # linear terms before and among the rules
    for n_jobs in (1, 2):
        columns = _in_threads(n_jobs, matrix.columns, selected)
        assert (columns != explicit[:, selected]).nnz == 0
    # the same from the rows a Problem already grouped by column (polish along a path)
    grouped = sort_rows_by_leaf(matrix.leaves, matrix.offsets)
    assert (matrix.columns(selected, grouped) != explicit[:, selected]).nnz == 0
    assert matrix.columns(selected[:1], grouped).shape == (X.shape[0], 1)  # a linear term alone
