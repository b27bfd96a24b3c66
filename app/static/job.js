// One job: live status and progress (server-sent events), its settings and timings, and once it has
// succeeded, its path (chart and steps), its grid, and the step chosen on the chart with rules and trees.

import { get, jobEvents } from "./api.js";
import { showBatchChunk, showBatchJob } from "./batch.js";
import { crossValidationSentence, gridChart, metricLabel, metricPairs, metricsText, pathChart, survivalCard,
         termsText } from "./chart.js";
import { card, dataTable, definitions, fieldLabel, fill, formatCount, formatDuration, formatNumber, formatTime, h,
         idText, link, pageHeading, problemAlert, statusBadge } from "./dom.js";
import { frontierCard } from "./frontier.js";
import { cancelJob, isActive, progressMeter } from "./jobs.js";
import { ruleStepNote } from "./rule-step.js";
import { stepPanel } from "./step.js";

const CELL_RESULTS_AT_ONCE = 4;
// why a path ended (solver.path's stop_reason), in words
const STOP_REASONS = {
  completed: "the last λ of the grid",
  max_rules: "the rule budget: the next step held more terms",
  past_its_best: "patience: steps past its best step, with twice its terms, found no better one",
  callback: "a cancel",
};
const stopReason = reason => STOP_REASONS[reason] ?? fieldLabel(reason);

function datasetOf(job) {
  return job.spec.dataset_id ?? job.spec.recipe?.dataset_id;
}

function overview(job) {
  const spec = job.spec;
  return definitions([
    ["status", h("span", null, statusBadge(job.status), job.attempt > 1 ? ` attempt ${job.attempt}` : ""), "status"],
    ["kind", job.kind],
    ["dataset", datasetOf(job) ? link(`/dashboard/datasets/${datasetOf(job)}`, idText(datasetOf(job))) : null],
    ["forest", spec.forest_id ? link(`/dashboard/forests/${spec.forest_id}`, idText(spec.forest_id)) : null],
    spec.fold === null || spec.fold === undefined
      ? ["grid job", job.parent_id ? link(`/dashboard/jobs/${job.parent_id}`, idText(job.parent_id)) : null]
      : ["cross-validation job", h("span", null, `fold ${spec.fold} of `, link(`/dashboard/jobs/${job.parent_id}`, idText(job.parent_id))), "fold"],
    ["created", formatTime(job.created_at)],
    ["started", job.started_at ? formatTime(job.started_at) : null],
    ["finished", job.finished_at ? formatTime(job.finished_at) : null],
  ]);
}

/** The loss a job's path fits (its `loss_info`: name, metrics and their labels), which names its metrics. */
const lossOf = job => job.loss_info ?? null;

/** The selected step of a finished path or grid job and every readable metric of it: "Selected step 12 (9 terms: 7
 * rules, 2 linear terms): validation R² 0.5234, RMSE 2.141, MAE 1.52, MSE 4.58". */
const selectedText = job => `Selected step ${job.summary.selected} (${termsText(job.summary)}): `
  + metricsText(job.summary, lossOf(job), { named: true });

/** The phases a job's timings name (the worker's timers), in words. */
const TIMINGS = {
  queue_wait: "queue wait (before the job started)",
  folds: "folds (first fold's start to last fold's end)",
  wait_after_folds: "wait for a worker after the folds",
  cells: "cells (first cell's start to last cell's end)",
  wait_after_cells: "wait for a worker after the cells",
  stability_fits: "stability fits (first fit's start to last fit's end)",
  wait_after_stability_fits: "wait for a worker after the stability fits",
  load_forest: "load forest",
  train: "train forest",
  load_data: "load data",
  matrix_build: "leaf matrix",
  path: "path",
  refit: "refit on every row",
  rules: "rules of every step",
  stability: "stability fits",
  store: "store result",
  total: "total (submission to end)",
};

function progressFacts(job) {
  const { progress } = job;
  const loss = lossOf(job);
  // the current step's validation metrics, those its loss has (R² and RMSE of regression, AUC of classifiers, …)
  const current = metricPairs([progress]).filter(pair => pair.val)
    .map(pair => [`validation ${metricLabel(pair.name, loss)} now`, formatNumber(progress[pair.val], 5), pair.val]);
  return definitions([
    ["phase", progress.phase, "phase"],
    ["folds finished", job.kind === "cv" && job.cells && progress.unfinished !== undefined
      ? `${job.cells.length - progress.unfinished} of ${job.cells.length}` : null, "folds"],
    ["lambda step", progress.step !== undefined ? `${progress.step} of ≤${progress.n_steps}` : null, "step"],
    ["terms now", progress.n_terms !== undefined ? termsText(progress) : null, "n_terms"],
    ["λs now", progress.lambda_s !== undefined ? formatNumber(progress.lambda_s) : null],
    [`train ${metricLabel("loss", loss)} now`, progress.train_loss !== undefined ? formatNumber(progress.train_loss, 5) : null],
    ...current,
    ["best so far", progress.best ? `${metricsText(progress.best, loss, { count: 2, named: true })} at step `
      + `${progress.best.step} (${termsText(progress.best)})` : null, "best"],
    ["stability fits", progress.n_fits !== undefined ? `${progress.fit} of ${progress.n_fits}` : null, "fits"],
    ["cells running", progress.unfinished !== undefined ? formatCount(progress.unfinished) : null],
  ]);
}

/** The settings the job runs with, as the API echoes them in its spec. */
function settings(job) {
  const spec = job.spec;
  const recipe = spec.recipe;
  const rows = [];
  if (spec.path) {
    rows.push(["validation", spec.validation_dataset_id
      ? link(`/dashboard/datasets/${spec.validation_dataset_id}`, idText(spec.validation_dataset_id))
      : spec.path.cv_folds ? `${spec.path.cv_folds} folds (seed ${spec.path.random_state})`
      : `holdout of ${formatNumber(spec.path.validation_fraction)} (seed ${spec.path.random_state})`]);
    for (const [key, value] of Object.entries(spec.path)) {
      if (value !== null && !["validation_fraction", "random_state"].includes(key)) rows.push([fieldLabel(key), Array.isArray(value) ? value.map(v => formatNumber(v)).join(", ") : String(value)]);
    }
  }
  if (spec.grid) rows.push(["grid γ", spec.grid.gamma.join(", ")], ["grid fusion ratio", spec.grid.fusion_ratio.join(", ")]);
  if (recipe) {
    rows.push(["forest trained", `${recipe.params.kind}, ${recipe.params.n_estimators} trees of depth ${recipe.params.max_depth}`],
              ["forest max features", String(recipe.params.max_features)], ["forest seed", String(recipe.params.random_state)],
              ["forest learns from", recipe.rows.validation_fraction ? `the rows outside the ${formatNumber(recipe.rows.validation_fraction)} holdout (seed ${recipe.rows.seed})` : "every row"]);
  }
  return definitions(rows);
}

function timings(job) {
  const rows = Object.entries(job.timings).map(([phase, seconds]) => [TIMINGS[phase] ?? fieldLabel(phase), formatDuration(seconds), `timing-${phase}`]);
  if (job.cache_hit !== null && job.cache_hit !== undefined) rows.push(["leaf matrix cached", job.cache_hit ? "yes" : "no"]);
  return rows.length ? definitions(rows) : h("p", { class: "muted" }, "Not started yet.");
}

function failure(job) {
  return [
    job.error ? h("div", { class: "problem", role: "alert" }, h("p", null, h("strong", null, `${job.error.type}: `), job.error.detail)) : null,
    job.history.length ? dataTable({ caption: "Earlier attempts whose worker was lost", rows: job.history, columns: [
      { label: "Attempt", numeric: true, cell: lost => lost.attempt },
      { label: "Lost at", cell: lost => formatTime(lost.lost_at) },
      { label: "Reason", cell: lost => lost.reason }] }) : null,
  ];
}

/** Each succeeded cell's result, a few requests at a time. */
async function cellResults(grid, signal) {
  const results = new Map();
  const queue = grid.filter(cell => cell.status === "succeeded");
  const worker = async () => {
    for (let cell = queue.shift(); cell; cell = queue.shift()) results.set(cell.job_id, await get(`/v1/jobs/${cell.job_id}/result`, signal));
  };
  await Promise.all(Array.from({ length: CELL_RESULTS_AT_ONCE }, worker));
  return results;
}

function gridSection(result, loss, signal) {
  const cellLabel = cell => `γ ${formatNumber(cell.gamma)}, fusion ${formatNumber(cell.fusion_ratio)}`;
  const chartSlot = h("div");
  fill(chartSlot, async () => {
    const results = await cellResults(result.grid, signal);
    return gridChart({ budget: result.parameters.path.max_rules, loss,
                       cells: result.grid.filter(cell => results.has(cell.job_id)).map(cell => ({
                         label: cellLabel(cell), steps: results.get(cell.job_id).steps,
                         selected: results.get(cell.job_id).selected, best: cell.job_id === result.best_cell_id })) });
  });
  return card("Grid",
    dataTable({ rows: result.grid, rowProps: cell => ({ class: cell.job_id === result.best_cell_id ? "chosen" : null }), columns: [
      { label: "Cell", cell: cell => h("span", null, link(`/dashboard/jobs/${cell.job_id}`, cellLabel(cell)),
                                       cell.job_id === result.best_cell_id ? h("span", { class: "tag selected" }, " chosen") : null) },
      { label: "Status", cell: cell => statusBadge(cell.status) },
      { label: "Selected step", numeric: true, cell: cell => cell.summary ? cell.summary.selected : "—" },
      { label: "Terms", cell: cell => cell.summary ? termsText(cell.summary) : "—" },
      { label: "Validation", cell: cell => (cell.summary ? metricsText(cell.summary, loss, { count: 2 }) : "—") },
      { label: "Stopped by", cell: cell => (cell.summary ? stopReason(cell.summary.stop_reason) : "—") }] }),
    chartSlot);
}

function stepsTable(result, jobId, loss) {
  // every metric the steps record beside the loss, of the validation rows (the training rows' without them): R²,
  // RMSE and MAE of regression; AUC (macro one-vs-rest for K classes), accuracy and Brier score of classifiers;
  // the MAE of the rate of counts
  const metrics = metricPairs(result.steps).filter(pair => pair.name !== "loss").map(pair => ({
    label: `${pair.val ? "Validation" : "Train"} ${metricLabel(pair.name, loss)}`, numeric: true,
    cell: step => formatNumber(step[pair.val ?? pair.train], ["auc", "accuracy", "r2", "cindex"].includes(pair.name) ? 4 : 5) }));
  return dataTable({
    rows: result.steps,
    rowProps: step => ({ "data-step": step.index, class: step.index === result.selected ? "chosen" : null }),
    columns: [
      { label: "Step", cell: step => link(`/dashboard/jobs/${jobId}/steps/${step.index}`, `step ${step.index}`) },
      { label: "λs", numeric: true, cell: step => formatNumber(step.lambda_s) },
      { label: "Terms", numeric: true, cell: step => formatCount(step.n_terms) },
      { label: "Rules", numeric: true, cell: step => formatCount(step.n_rules) },
      ...(result.steps.some(step => step.n_linear) ? [{ label: "Linear terms", numeric: true, cell: step => formatCount(step.n_linear) }] : []),
      { label: "Antecedents", numeric: true, cell: step => formatCount(step.n_antecedents) },
      { label: `Train ${metricLabel("loss", loss)}`, numeric: true, cell: step => formatNumber(step.train_loss, 5) },
      { label: `Validation ${metricLabel("loss", loss)}`, numeric: true, cell: step => formatNumber(step.val_loss, 5) },
      // a cross-validated step's: how alike its folds' rule sets are there (their mean pairwise Dice index)
      ...(result.cv?.stability ? [{ label: "Folds' Dice", numeric: true, cell: step => formatNumber(result.cv.stability.dice[step.index], 3) }] : []),
      ...metrics,
      { label: "Converged", cell: step => (step.converged ? "yes" : `no (${step.n_iter} passes)`) },
    ],
  });
}

/** In place of a step's rules, for a fold of a cross-validation: the fold's path only validates each step on the
 * fold's rows, and the rules are the parent's, refitted on every row (the API answers a fold's step rules with 422). */
function foldStepNote(job, fold) {
  const element = h("section", { class: "card", id: "step", "aria-live": "polite" });
  const show = k => element.replaceChildren(h("h2", { id: "step-title" }, `Step ${k} of fold ${fold}`),
    h("p", null, "This fold's path validates each step on the rows of the fold; the rules of a step are the "
      + "cross-validation job's, refitted on every row: ", link(`/dashboard/jobs/${job.parent_id}/steps/${k}`, `its step ${k}`), "."));
  return { element, show };
}

/** The path of a succeeded path or grid job and the panel of the step shown. Returns {elements, showStep}. */
function pathSection(job, result, dataset, { signal, navigate }) {
  const stepUrl = k => `/dashboard/jobs/${job.id}/steps/${k}`;
  const fold = result.parameters.fold ?? null;
  const panel = fold === null ? stepPanel({ jobId: job.id, result, dataset, loss: lossOf(job), signal, navigate })
    : foldStepNote(job, fold);
  const chart = pathChart({ steps: result.steps, selected: result.selected, budget: result.parameters.path.max_rules,
                            label: "Path", loss: lossOf(job), cv: result.cv ?? null, onShow: k => navigate(stepUrl(k), { replace: true }) });
  const table = stepsTable(result, job.id, lossOf(job));
  const sourceNote = result.kind === "grid"
    ? h("p", { class: "muted" }, "The chosen cell's path: ", link(`/dashboard/jobs/${result.best_cell_id}`, idText(result.best_cell_id))) : null;
  const elements = [
    card("Path",
      definitions([["steps", formatCount(result.steps.length)], ["selected step", String(result.selected), "selected"],
                   ["loss", result.parameters.path.loss, "loss"],
                   ["classes", result.classes ? result.classes.join(", ") : null, "classes"],
                   ["rule budget", (result.parameters.path.max_rules ?? null) === null ? "none"
                     : `at most ${formatCount(result.parameters.path.max_rules)} terms (rules + linear terms)`, "max_rules"],
                   ["stopped by", stopReason(result.stop_reason)],
                   ["λ max", formatNumber(result.lambda_max)], ["training rows", formatCount(result.n_train)],
                   result.cv
                     ? ["validation", `${result.cv.folds}-fold cross-validation, step by ${result.cv.selection === "1se" ? "the one standard error rule" : result.cv.selection}`, "cv"]
                     : ["validation rows", formatCount(result.n_val)],
                   ["rule stability", result.stability ? `Dice ${formatNumber(result.stability.dice, 3)} over ${result.stability.n_resamples} half-sample fits` : null, "stability"],
                   ["fold stability", result.cv?.stability ? `Dice ${formatNumber(result.cv.stability.dice[result.selected], 3)} between `
                     + `the ${result.cv.folds} folds' rules at the selected step` : null, "cv-stability"]]),
      sourceNote,
      ruleStepNote(result, stepUrl),
      h("p", { class: "muted" }, "Click a step, or focus the chart and use the arrow keys, to see its rules and trees."),
      chart.element,
      result.cv ? h("p", { id: "cv-choice" }, crossValidationSentence(result, lossOf(job))) : null,
      h("details", null, h("summary", null, `Every step (${result.steps.length})`), h("div", { class: "table-scroll" }, table))),
    frontierCard(result, lossOf(job), k => navigate(stepUrl(k), { replace: true })),
    result.survival ? survivalCard(result.survival, dataset, `The selected step ${result.selected} on the `
      + `${result.cv ? "rows it was refitted on (in sample)" : `${formatCount(result.n_val)} validation rows`}: their `
      + "Kaplan–Meier estimate beside the mean of the model's survival curves over the same rows. Where the two part, "
      + "the model's baseline or its hazard ratios miss the time course of these rows.") : null,
    result.kind === "grid" ? gridSection(result, lossOf(job), signal) : null,
    panel.element,
  ];
  const showStep = step => {
    const k = Number.isInteger(Number(step)) && Number(step) >= 0 && Number(step) < result.steps.length ? Number(step) : result.selected;
    chart.show(k);
    table.querySelectorAll("tr[data-step]").forEach(row => row.toggleAttribute("aria-current", Number(row.dataset.step) === k));
    panel.show(k);
  };
  return { elements, showStep };
}

async function outcome(job, context, step) {
  if (job.status === "failed") return { elements: [card("Why it failed", failure(job))] };
  if (job.status === "canceled") return { elements: [card("Canceled", h("p", null, `Canceled ${formatTime(job.finished_at)}.`))] };
  if (job.status !== "succeeded") return { elements: [] };
  if (job.kind === "train") {
    const summary = job.summary;
    return { elements: [card("Forest trained",
      definitions([["forest", link(`/dashboard/forests/${summary.forest_id}`, idText(summary.forest_id))],
                   ["trees", formatCount(summary.n_trees)], ["leaves (candidate rules)", formatCount(summary.n_leaves)]]),
      link(`/dashboard/jobs/new?dataset=${datasetOf(job)}&forest=${summary.forest_id}`, "Run a path on this forest"))] };
  }
  const [result, dataset] = await Promise.all([get(`/v1/jobs/${job.id}/result`, context.signal),
                                               get(`/v1/datasets/${datasetOf(job)}`, context.signal).catch(() => null)]);
  const path = pathSection(job, result, dataset, context);
  path.showStep(step);
  return path;
}

export function showJob(main, { jobId, step }, context) {
  const { signal } = context;
  const cancel = h("button", { type: "button", class: "danger", hidden: true }, "Cancel job");
  const message = h("div", { "aria-live": "polite" });
  const status = h("div");
  const progress = h("div", { "aria-live": "polite" });
  const liveChartSlot = h("div");
  const results = h("div");
  const details = h("div", { class: "columns" });
  main.append(h("div", { class: "heading-row" }, pageHeading(`Job ${jobId}`), cancel), message,
              card("Status", status), card("Progress", progress, liveChartSlot), results, details);

  let shownStep = step;
  let path = null;
  let liveChart = null;
  const livePoints = [];

  function render(job) {
    status.replaceChildren(overview(job));
    progress.replaceChildren(progressMeter(job), isActive(job) ? h("div", { id: "progress-facts" }, progressFacts(job))
      : job.summary && "val_loss" in job.summary ? h("p", { id: "selected-summary" }, selectedText(job)) : null);
    details.replaceChildren(card("Settings", settings(job)), card("Timings", timings(job)));
    cancel.hidden = !isActive(job);
    const p = job.progress;
    if (["path", "cv", "stability_fit"].includes(job.kind) && p.step && p.n_terms !== undefined) {
      // every metric the progress carries (the losses; R², RMSE and MAE of regression; AUC, accuracy and Brier
      // score of classifiers; MAE of counts)
      const metrics = Object.fromEntries(Object.entries(p).filter(([key]) => /^(train|val)_/.test(key)));
      livePoints[p.step - 1] = { index: p.step - 1, n_terms: p.n_terms, n_rules: p.n_rules, n_linear: p.n_linear,
                                 lambda_s: p.lambda_s, ...metrics };
      const points = livePoints.filter(Boolean);
      if (!liveChart && isActive(job)) {
        liveChart = pathChart({ steps: points, budget: job.spec.path.max_rules, label: "Path so far", loss: lossOf(job) });
        liveChartSlot.replaceChildren(h("h3", null, "Path so far"), liveChart.element);
      } else {
        liveChart?.setSteps(points);
      }
    }
  }

  cancel.addEventListener("click", async () => {
    try { render(await cancelJob({ id: jobId })); } catch (error) { message.replaceChildren(problemAlert(error)); }
  });

  async function follow() {
    let job = await get(`/v1/jobs/${jobId}`, signal);
    if (job.kind === "batch") return showBatchJob(main, job, context); // batch.js: rows, chunks, the download
    if (job.kind === "batch_chunk") return showBatchChunk(main, job);
    render(job);
    if (isActive(job)) {
      for await (const event of jobEvents(jobId, signal)) { job = event.job; render(job); }
    }
    if (signal.aborted) return;
    liveChartSlot.replaceChildren();
    await fill(results, async () => {
      path = await outcome(job, context, shownStep);
      return path.elements;
    });
  }

  follow().catch(error => {
    if (error.name === "AbortError") return;
    message.replaceChildren(problemAlert(error));
  });

  return params => {
    if (params.jobId !== jobId) return false;
    shownStep = params.step;
    path?.showStep?.(params.step);
    return true;
  };
}
