"""How a job stores a library fit (``solver.fitting.RuleFit``): every step's rules and the path's result, with what
it measured beside it: survival curves, a cross-validation's choice and fold stability, the half-sample stability."""

from typing import Any

import numpy as np

from app.core.job_documents import PathJobSpec
from app.core.result_documents import (
    CrossValidation,
    FoldStability,
    FrontierStep,
    PathJobResult,
    PathResultBase,
    RuleStability,
    RuleStepChoice,
    SurvivalCurves,
)
from solver import RuleEnsemble
from solver.fitting import RuleFit
from solver.losses.cox import kaplan_meier
from solver.path import best_step
from solver.stability import PathRuleKeys, reference_cuts, rule_stability
from worker.fit_data import PathData
from worker.runs import JobRun, path_result


def store_fit(
    run: JobRun[PathJobSpec],
    data: PathData,
    fit: RuleFit,
    cache_hit: bool | None = None,
    fold_keys: list[PathRuleKeys | None] | None = None,
) -> None:
    """Every step's rules, the stability of the rules where asked, and the path's result; a cross-validation's
    ``fold_keys``: each fold's rules at every step (None: a fold stored before folds kept them)."""
    spec = run.spec
    if fit.val_rows is not None:
        n_val = len(fit.val_rows)
    elif fit.fold_steps is not None:
        n_val = len(fit.train_rows)  # every row, each in its fold
    else:
        assert data.y_val is not None  # fit_rules holds no rows out only where it is given validation rows
        n_val = len(data.y_val)
    run.phase("rules")
    with run.timed("rules"):  # every step's, built once here as the library builds the selected step's
        ensembles = [fit.rules if step == fit.selected else fit.rules_at(step) for step in range(len(fit.path.steps))]
    run.check_deadline()
    stability = None
    if spec.stability_resamples is not None:
        run.phase("stability", fit=spec.stability_resamples, n_fits=spec.stability_resamples)  # every fit ended
        with run.timed("stability"):
            stability = _rule_stability(run, fit, ensembles)
        run.check_deadline()
    cache_hit = data.cache_hit if cache_hit is None else cache_hit
    with run.timed("store"):
        run.core.results.put_rules(run.job_id, ensembles)
        result = path_job_result(
            run,
            data,
            fit.path,
            fit.selected,
            len(fit.train_rows),
            n_val,
            cache_hit,
            cv=_cross_validation(fit, _fold_stability(data, fit, ensembles, fold_keys)),
            stability=stability,
            survival=_survival_curves(data, fit, ensembles),
        )
        run.core.results.put(result)
    run.succeed(result.summary(), cache_hit=cache_hit)


SURVIVAL_GRID_POINTS = 50


def _survival_curves(data: PathData, fit: RuleFit, ensembles: list[RuleEnsemble]) -> SurvivalCurves | None:
    """The rules of every step of a path whose rules give survival curves (a Cox model's: a baseline hazard) on its
    validation rows (held out, another dataset's, or every row of a cross-validation): their Kaplan–Meier curve
    beside the mean of each step's S(t | x), on a grid of SURVIVAL_GRID_POINTS times from 0 to their last time or
    the training rows' last follow-up, where the curves end (the library's kaplan_meier and predict_survival)."""
    selected = ensembles[fit.selected]
    if selected.baseline_hazard is None:
        return None
    if fit.val_rows is not None and len(fit.val_rows):
        X, y = data.X[fit.val_rows], data.y[fit.val_rows]
    elif data.X_val is not None and data.y_val is not None:
        X, y = data.X_val, data.y_val
    else:
        X, y = data.X, data.y
    # every step's baseline hazard is of the same training rows: it ends at their last follow-up time
    end = min(float(np.abs(y).max()), float(selected.baseline_hazard[0][-1]))
    times = np.linspace(0.0, end, SURVIVAL_GRID_POINTS)
    steps = [ensemble.predict_survival(X, times).mean(axis=0).tolist() for ensemble in ensembles]
    return SurvivalCurves(
        times=times.tolist(),
        kaplan_meier=kaplan_meier(y, times).tolist(),
        model=steps[fit.selected],
        steps=steps,
    )


def path_job_result(
    run: JobRun[PathJobSpec], data: PathData, path, selected: int, n_train: int, n_val: int, cache_hit: bool, **extra
) -> PathJobResult:
    """The stored result of a path job's path (a whole path's, or a fold's): ``extra`` its cv and stability."""
    spec = run.spec
    return PathJobResult(
        job_id=run.job_id,
        source_job_id=run.job_id,
        dataset_id=spec.dataset_id,
        forest_id=spec.forest_id,
        parameters=spec,
        lambda_max=path.lambda_max,
        stop_reason=path.stop_reason,
        n_train=n_train,
        n_val=n_val,
        cache_hit=cache_hit,
        selected=selected,
        steps=path.steps,
        classes=data.dataset.rule_classes(spec.path.loss),
        rule_step=RuleStepChoice.model_validate(path.rule_step(selected).to_dict()),
        **extra,
    )


def _fold_stability(data: PathData, fit: RuleFit, ensembles: list[RuleEnsemble], fold_keys) -> FoldStability | None:
    """How the refit's rules at each step (``ensembles``) repeat over its folds' paths (the library's
    fold_stability, binned on every row as each fold binned its own; a cross-validated fit in one job, a stability
    fit's, measured it itself); None without every fold's rules."""
    if fold_keys is not None:
        if any(keys is None for keys in fold_keys):
            return None
        fit.measure_fold_stability(fold_keys, data.X, ensembles)
    if fit.fold_stability is None:
        return None
    measured = fit.fold_stability.to_dict()
    return FoldStability(**{name: value for name, value in measured.items() if name != "n_folds"})


def _cross_validation(fit: RuleFit, stability: FoldStability | None) -> CrossValidation | None:
    """What a cross-validated fit chose and from what, how its rules repeat over its folds and the frontier of loss,
    terms and that stability it gives (None for a path with validation rows)."""
    if fit.fold_steps is None:
        return None
    spec, steps = fit.path.spec, fit.path.steps
    best_min, best_1se = best_step(steps, spec.max_rules, "loss"), best_step(steps, spec.max_rules, "1se")
    assert best_min is not None and best_1se is not None  # fit_rules selected a step within the budget
    frontier = None if fit.frontier is None else [FrontierStep.model_validate(step.to_dict()) for step in fit.frontier]
    return CrossValidation(
        folds=len(fit.fold_steps),
        selection=spec.selection,
        best_min=best_min,
        best_1se=best_1se,
        fold_steps=fit.fold_steps,
        stability=stability,
        frontier=frontier,
    )


def _rule_stability(run: JobRun[PathJobSpec], fit: RuleFit, ensembles) -> RuleStability:
    """The selection frequency of every step's rules over the job's half-sample fits (solver.stability), each a
    stability_fit job that ended before this one: the selected rules of each, in resample order (pairs of halves),
    conditions binned on the quantile cuts of this fit's training rows."""
    fits = sorted((path_result(run, fit_id) for fit_id in run.record.stability_fits or []), key=_resample)
    if len(fits) != run.spec.stability_resamples or [_resample(f) for f in fits] != list(range(len(fits))):
        raise RuntimeError(f"job {run.job_id} has not the {run.spec.stability_resamples} stability fits it measures")
    rules = [_selected_rules(run, half) for half in fits]
    pairs = list(zip(rules[::2], rules[1::2]))
    cuts = reference_cuts(fit.X_train)
    measured = [rule_stability(ensemble, pairs, cuts) for ensemble in ensembles]
    first = measured[0]
    return RuleStability(
        dice=first.dice,
        pair_dice=first.pair_dice,
        n_resamples=first.n_resamples,
        frequencies=[[float(f) for f in m.frequencies] for m in measured],
    )


def _resample(result: PathResultBase) -> int:
    return -1 if result.parameters.resample is None else result.parameters.resample


def _selected_rules(run: JobRun[Any], result: PathResultBase) -> RuleEnsemble:
    """The rules a stability fit selected, as its job stored them."""
    rules = run.core.results.step_rules(result.job_id, result.selected)
    if rules is None:
        raise RuntimeError(f"the rules of stability fit {result.job_id} expired before job {run.job_id} read them")
    return rules
