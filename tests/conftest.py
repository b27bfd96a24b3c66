"""The test suite, laid out like the code it tests.

- ``tests/solver/``: the library (``solver/``) against independent references; no service imports.
- ``tests/service/``: the service core (``app/core``, ``worker``) on fakeredis (``test_core_*``,
  ``test_api_edge``) and the whole service on a real Redis with real worker processes (marked
  ``integration``; fixtures in ``tests/service/conftest.py``).
- ``tests/bench/``: smoke tests of the benchmarks in ``bench/``.
- ``tests/test_layering.py``: which layer may import which.
- ``tests/support/``: helpers shared by several modules (the shipped tables, the service stack, problem+json
  checks, exported-model runners); no test module imports another's helpers or fixtures.
- ``tests/data/``: the small tables the tests use (gzipped CSV, target last).

Tiers: the hook below marks every test, so that no module can forget its markers (declared in pyproject.toml).
Four say what a test is or needs:

- ``reference``: checks against an independent reference (cvxpy, skglm, scikit-learn's solvers, brute force);
- ``contract``: scikit-learn's estimator checks and the schemathesis run of the OpenAPI document;
- ``integration``: a real Redis and worker processes: the tests that use a fixture of ``INTEGRATION_FIXTURES``
  and those the tables below name, which start their own;
- ``browser``: the dashboard driven by Debian's chromium;

and two what it costs:

- ``slow``: takes more than about two seconds on a 2-core machine with numba's cache warm (measured; a
  module whose tests all take longer keeps its quickest in the fast tier);
- ``fast``: every test that is neither contract, browser nor slow: the README's test command,
  ``python -m pytest -q -m fast``. Quick reference and integration tests are fast tests, so that the fast tier
  touches every module that has a quick test; ``-m "fast and not integration"`` runs it without a Redis.

``.ci/run`` runs ``-m fast``, then ``-m "not fast"``.
"""

from pathlib import Path

import pytest

TESTS = Path(__file__).parent
OUTSIDE_FAST = {"contract", "browser", "slow"}
# a test that uses one of these (directly or through another fixture, e.g. own_queue) talks to a real Redis
INTEGRATION_FIXTURES = {"api", "stack", "isolated_settings", "served"}
# markers (separated by spaces) of every test of a module, by its path under tests/
MODULE_MARKERS = {
    "service/test_batch_dashboard.py": "browser integration",
    "service/test_dashboard.py": "browser integration",
    "service/test_cv_dashboard.py": "browser integration",
    "service/test_drift_dashboard.py": "browser integration",
    "service/test_rule_step_dashboard.py": "browser integration",
    "service/test_forms_dashboard.py": "browser integration",
    "service/test_survival_curves_dashboard.py": "browser integration",
    "service/test_survival_dashboard.py": "browser integration",
    "service/test_faults.py": "integration",  # its own redis-server and `fire-rules serve`
    "service/test_lost_claims.py": "integration slow",  # workers of its own, each killed at a point and replaced
    "service/test_noisy_neighbour.py": "integration slow",  # its own redis-server, `serve` and workers, ~50 s
    "service/test_openapi.py": "integration",  # the API on the session's Redis, no fixture
    "solver/test_references.py": "reference",
}
# markers of single tests, by module and test function (every parameter of it) or test id (one parameter)
TEST_MARKERS = {
    "bench/test_ebm_smoke.py": {  # the report: every method on two tables, ~11 s (the EBM with pairs, FIRE's forests)
        "test_every_method_is_fitted_and_scored_on_every_table": "slow",
        "test_the_summary_is_the_median_of_per_split_ratios": "slow",
    },
    "bench/test_stable_selection_smoke.py": {  # two cross-validated fits of five folds and two holdout fits, ~12 s
        "test_every_selection_picks_a_step_within_the_budget_on_both_halves": "slow",
        "test_the_summary_is_the_median_of_per_fit_ratios_to_1se": "slow",
    },
    "bench/test_near_identical_rules_smoke.py": {  # two FIRE fits, ~4 s
        "test_a_repetition_records_each_setting_s_rules_pairs_and_dice": "slow",
    },
    "bench/test_batch_scoring_smoke.py": {  # starts `fire-rules serve` with two workers
        "test_the_report_gives_the_batch_and_in_process_times_and_the_workers_memory": "slow",
    },
    "service/test_agreement.py": {
        "test_service_and_library_select_the_same_step_and_rules[abalone (text column Sex)]": "slow",
    },
    "service/test_drift.py": {  # starts `fire-rules serve` and stops it
        "test_a_serve_process_stopped_by_sigterm_adds_its_counts_before_it_exits": "slow",
    },
    "service/test_drift_exact.py": {  # the models they score are trained first (module fixture); or one of its own
        "test_the_training_rows_scored_back_by_every_route_flag_nothing": "slow",
        "test_the_diabetes_bmi_shifted_by_one_sd_is_the_only_column_flagged": "slow",
        "test_a_profile_stored_before_is_taken_again_and_its_counts_are_not_read_in_the_new_bins": "slow",
        "test_a_profile_stored_before_whose_dataset_is_gone_is_read_and_counted_as_it_is": "slow",
    },
    "service/test_amounts_service.py": {  # each runs a job on the workers; the 422s are the quick ones
        "test_a_tweedie_job_with_exposure_agrees_with_the_library_and_scores_amounts": "slow",
        "test_gamma_on_a_target_with_zeros_is_a_422_naming_the_rows": "slow",
    },
    "service/test_offsets_service.py": {  # runs two jobs on the workers; the 422s are the quick ones
        "test_a_poisson_job_with_an_offset_is_the_library_fit_and_the_exposure_fit_and_scores_with_it": "slow",
    },
    "service/test_strict_edges.py": {  # generated requests (schemathesis), hundreds and >= 5,000 of them
        "test_hundreds_of_generated_requests_answer_no_5xx_and_no_non_finite_number": "slow",  # ~15 s
        "test_thousands_of_generated_requests_answer_no_5xx_and_no_non_finite_number": "contract",  # ~4 min
    },
    "service/test_survival_service.py": {  # the Cox job (module fixture) runs on the workers
        "test_a_cox_job_agrees_with_the_library_and_carries_survival_curves": "slow",
        "test_scoring_a_cox_model_gives_hazard_ratios_and_survival_curves": "slow",
    },
    "service/test_batch_routes.py": {  # a path job (module fixture) before their batches
        "test_a_bare_name_scores_its_latest_version_as_predict_by_name_does": "slow",
        "test_cancel_answers_when_a_worker_took_a_chunk_and_ended_its_execution_meanwhile": "slow",
    },
    "service/test_batch_scoring.py": {  # their models are trained first; the tenants test starts a worker
        "test_a_regression_file_scores_in_chunk_jobs_as_the_library_and_predict": "slow",
        "test_a_classifier_gives_labels_probabilities_and_explanations_as_predict": "slow",
        "test_only_the_model_s_tenant_sees_its_batch_jobs_and_results": "slow",
        "test_a_chunk_whose_worker_died_is_retried_and_the_batch_completes": "slow",
    },
    "service/test_batch_scale.py": {  # 10,000 chunks submitted, canceled and deleted; batches on the workers
        "test_a_batch_of_ten_thousand_chunks_is_answered_in_seconds_and_canceled_twice": "slow",
        "test_drift_counts_the_rows_a_batch_delivered_and_none_of_one_that_failed_or_was_canceled": "slow",
    },
    "service/test_bounded_uploads.py": {  # starts `fire-rules serve` and sends it 16 gzip bombs
        "test_gzip_bombs_on_every_route_are_refused_with_the_api_under_600_mb": "slow",
    },
    "service/test_rule_step_service.py": {  # path and cv jobs of the default 500 trees on the workers
        "test_a_path_job_and_its_model_name_the_best_step_with_a_rule_as_the_library_does": "slow",
        "test_a_cross_validated_job_gives_the_cost_with_its_standard_error_as_the_library_does": "slow",
    },
    "service/test_parents.py": {  # a cross-validation's folds, fits and refit in this process
        "test_stability_fits_as_cells_give_the_librarys_serial_stability_bit_for_bit[cross-validation]": "slow",
    },
    "service/test_cross_validation.py": {
        "test_the_folds_run_as_cells_and_a_killed_fold_is_retried_while_the_parent_completes": "slow",
    },
    "service/test_faults.py": {  # each starts workers or `serve` of its own; the cache test is the quickest
        "test_workers_and_data_outlive_redis_stopped_or_frozen_under_traffic": "slow",
        "test_jobs_queued_during_an_outage_run_after_it": "slow",
        "test_a_job_past_its_deadline_stops_within_its_phase": "slow",
        "test_a_killed_worker_s_job_is_retried_and_succeeds": "slow",
        "test_a_worker_waits_for_a_redis_down_at_its_start_and_starts_in_seconds_from_a_warm_cache": "slow",
        "test_serve_restarts_a_dead_worker_and_leaves_no_process_behind": "slow",
    },
    "service/test_inference_protocol.py": {  # the models they score are trained first
        "test_a_regression_model_by_name_version_and_alias_answers_as_predict": "slow",
        "test_classifiers_and_counts_answer_labels_probabilities_and_rates_as_predict": "slow",
        "test_errors_are_problems_with_the_protocols_error_message": "slow",
    },
    "service/test_jobs.py": {
        "test_a_killed_worker_s_job_is_retried_once_then_failed_never_lost": "slow",
        "test_cancel_a_running_job_stops_it_within_a_step": "slow",
    },
    "service/test_limits.py": {
        "test_a_heavy_upload_does_not_hold_other_requests_up": "slow",
    },
    "service/test_multiclass.py": {
        "test_a_seven_class_text_table_goes_through_the_api_and_agrees_with_the_library": "slow",
        "test_more_text_labels_than_fire_max_classes_is_a_422_naming_the_setting_and_the_target": "integration",
    },
    "service/test_openapi.py": {
        "test_every_answer_is_documented_and_none_is_a_server_error": "contract",
    },
    "service/test_tenants.py": {
        "test_delete_handles_what_depends_on_the_thing": "slow",
    },
    "service/test_warm_up.py": {  # a worker on an empty numba cache, until its horse starts a job
        "test_on_a_cold_cache_a_worker_takes_a_job_before_its_warm_up_ends": "slow",
    },
    "service/test_worker_threads.py": {
        "test_fire_num_threads_sets_the_threads_of_the_work_horse": "slow",
    },
    "solver/test_candidates.py": {
        "test_fused_logistic_nodes_and_linear_terms_match_cvxpy": "reference",
        "test_fused_multinomial_nodes_and_linear_terms_match_cvxpy": "reference",
        "test_fused_poisson_nodes_and_linear_terms_match_cvxpy": "reference",
        "test_fused_poisson_nodes_match_cvxpy": "reference",
        "test_fused_squared_nodes_match_cvxpy": "reference",
        "test_fused_multinomial_certificates_are_its_blocks_proximal_steps": "slow",  # ~5 s: thousands of passes
        "test_l1_path_is_sklearns_lasso_on_the_dense_columns": "reference",
        "test_mcp_steps_on_nodes_and_linear_terms_are_no_worse_than_proximal_gradient": "reference",
        "test_poisson_l1_with_a_linear_term_matches_cvxpy": "reference",
    },
    "solver/test_estimator.py": {
        "test_paths_are_reproducible_with_a_seed": "slow",
        "test_sklearn_contract": "contract",
    },
    "solver/test_estimator_classes_and_counts.py": {
        "test_text_labels_give_probabilities_per_class": "slow",
    },
    "solver/test_fused_blocks.py": {
        "test_weighted_fused_lasso_prox_matches_qp": "reference",
    },
    "solver/test_logistic.py": {
        "test_any_two_labels": "slow",
        "test_class_and_sample_weights_change_the_fit": "slow",
        "test_fit_rules_trains_the_classifier_variant_of_a_forest_spec": "slow",
        "test_fused_l1_logistic_matches_the_exponential_cone_reference": "reference",
        "test_l1_logistic_matches_sklearn_saga": "reference",
        "test_mcp_logistic_path_no_worse_than_skglm": "reference slow",
        "test_path_records_classification_metrics_and_selects_by_auc": "slow",
    },
    "solver/test_multinomial.py": {
        "test_group_l1_matches_cvxpy": "reference",
        "test_group_mcp_no_worse_than_proximal_gradient_from_the_same_point": "reference slow",
        "test_without_fusion_each_rule_sums_to_zero": "slow",
    },
    "solver/test_path_stop.py": {
        "test_a_path_past_its_best_stops_with_the_whole_grids_steps_and_selection": "slow",
        "test_the_rule_needs_both_the_steps_and_the_rules": "slow",
    },
    "solver/test_polish.py": {
        "test_every_loss_and_setting_polishes_without_losing_its_terms_or_fit": "slow",  # 69 pairs of fits, ~45 s
        "test_polished_weights_are_the_references_unpenalised_fit_on_the_same_columns": "reference",
    },
    "solver/test_poisson.py": {
        "test_l1_poisson_matches_cvxpy": "reference",
        "test_mcp_poisson_no_worse_than_proximal_gradient_from_the_same_point": "reference",
    },
    "solver/test_rules.py": {
        "test_abalone_rules_read_in_the_tables_words": "slow",
    },
    "solver/test_solver.py": {
        "test_direction_vector_hand_cases_with_tree_boundaries": "slow",
        "test_fused_lasso_prox_matches_qp": "reference",
        "test_l1_matches_sklearn_lasso": "reference",
        "test_l1_with_fusion_matches_convex_reference": "reference",
        "test_min_support_keeps_small_leaves_out_of_every_step": "slow",
        "test_mcp_path_no_worse_than_skglm": "reference slow",
        "test_penalty_prox_is_global_minimizer": "reference",
        "test_the_leaf_gradient_is_inlined_into_the_solver_loops": "slow",
        "test_unknown_penalty_code_raises": "slow",
    },
    "solver/test_survival_and_amounts.py": {  # references of the Cox, Tweedie and Gamma losses
        "test_l1_tweedie_and_gamma_equal_glum_on_the_same_columns": "reference slow",
        "test_l1_cox_equals_coxnet_on_the_same_columns": "reference",
        "test_fused_l1_cox_with_linear_terms_equals_cvxpy": "reference slow",
        "test_mcp_steps_are_no_worse_than_proximal_gradient_from_the_same_point": "reference slow",
        "test_cindex_equals_sksurvs_concordance_index_censored": "reference",
        "test_kaplan_meier_equals_sksurvs_estimator": "reference",
        "test_survival_curves_are_breslows_estimate_at_the_rules_scores": "reference",
    },
    "solver/test_threads.py": {
        "test_a_child_forked_after_parallel_loops_runs_them_too_and_so_do_concurrent_threads": "slow",
        "test_a_path_does_not_depend_on_n_jobs[logistic-nodes]": "slow",
        "test_a_path_does_not_depend_on_n_jobs[multinomial-leaves]": "slow",
        "test_a_path_does_not_depend_on_n_jobs[poisson-leaves]": "slow",
        "test_fire_num_threads_sizes_the_pool_and_a_wrong_value_is_named": "slow",
    },
    "test_layering.py": {  # each imports the packages in a fresh interpreter
        "test_the_core_never_loads_the_http_api": "slow",
        "test_the_workers_never_load_the_http_api": "slow",
    },
}


def markers_of(item: pytest.Item) -> set[str]:
    """The tier markers of one test: its module's, its own, integration by fixture, and fast for the rest."""
    module = item.path.relative_to(TESTS).as_posix()
    tests = TEST_MARKERS.get(module, {})
    markers = {*MODULE_MARKERS.get(module, "").split(), *tests.get(item.originalname, "").split()}
    markers.update(tests.get(item.name, "").split())
    if INTEGRATION_FIXTURES & set(item.fixturenames):
        markers.add("integration")
    if not markers & OUTSIDE_FAST:
        markers.add("fast")
    return markers


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # the service's tests last: the library's fill numba's on-disk cache from this process, and the workers the
    # service's tests start then load their kernels from it (from a cold cache, a fast run in the other order had
    # its first worker compiling past its registration timeout)
    items.sort(key=lambda item: item.path.relative_to(TESTS).parts[0] == "service")
    for item in items:
        for marker in sorted(markers_of(item)):
            item.add_marker(marker)
    for module in {item.module for item in items}:
        path = Path(module.__file__).relative_to(TESTS).as_posix()
        missing = [name for name in TEST_MARKERS.get(path, {}) if not hasattr(module, name.split("[")[0])]
        if missing:
            raise pytest.UsageError(f"TEST_MARKERS (tests/conftest.py) names tests {path} no longer has: {missing}")
