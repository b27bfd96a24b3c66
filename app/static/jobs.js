// Jobs: every job with its live status and progress, kept current by the jobs' server-sent events.

import { get, jobEvents, post } from "./api.js";
import { metricsText, termsText } from "./chart.js";
import { dataTable, formatTime, h, idText, link, pageHeading, problemAlert, statusBadge,
         tableRow } from "./dom.js";

const MAX_STREAMS = 4; // a browser holds about 6 connections per host: leave some for the page's requests
const LIST_REFRESH_MS = 5000;

export const isActive = job => job.status === "queued" || job.status === "running";

/** A parent job (a grid, a cross-validation, a batch) while it waits for its cells: it counts them as they end (a
 * cross-validation then refits on every row, builds the rules and measures their stability: its own phases). Once
 * its cells ended and only its stability fits are left, those are counted (phase stability, fit of n_fits). */
const byCells = job => Boolean(job.cells) && job.status === "queued" && job.progress.phase !== "stability";

/** What a parent's cells are, in words. */
const CELL_NOUNS = { cv: "folds", batch: "chunks" };

/** The cells of a parent waiting for them that have ended (none is known to have ended until one is counted). */
const cellsEnded = job => job.cells.length - (job.progress.unfinished ?? job.cells.length);

/** Where a job stands, in words, after its phase: "path: step 12 of ≤50 · 9 rules", "folds: 3 of 5 finished",
 * "stability: 6 of 10 half-sample fits"; once done, its steps and what stopped its path. */
function progressText(job) {
  const progress = job.progress;
  if (byCells(job)) return `${CELL_NOUNS[job.kind] ?? "cells"}: ${cellsEnded(job)} of ${job.cells.length} finished`;
  if (job.summary?.stop_reason) return `${job.summary.n_steps} steps, stopped by ${job.summary.stop_reason.replaceAll("_", " ")}`;
  if (progress.n_fits) return `${progress.phase}: ${progress.fit ?? 0} of ${progress.n_fits} half-sample fits`;
  if (progress.n_steps) {
    return `${progress.phase === "done" ? "" : `${progress.phase}: `}step ${progress.step ?? 0} of ≤${progress.n_steps}`
      + (progress.n_terms !== undefined ? ` · ${termsText(progress)}` : "");
  }
  return progress.phase;
}

/** A progress bar and its text; the bar is full once the job has ended. */
export function progressMeter(job) {
  const progress = job.progress;
  const [value, max] = byCells(job) ? [cellsEnded(job), job.cells.length]
    : progress.n_fits ? [progress.fit ?? 0, progress.n_fits]
    : [progress.step ?? 0, progress.n_steps ?? 0];
  const bar = isActive(job) && !max ? h("progress", { "aria-label": `${job.id} progress` })
    : h("progress", { max: Math.max(max, 1), value: isActive(job) ? value : Math.max(max, 1), "aria-label": `${job.id} progress` });
  return h("div", { class: "progress-cell" }, bar, h("small", { "data-field": "progress" }, progressText(job)));
}

/** The readable validation metrics (chart.js metricsText) of a job's selected step once done, or of its current
 * and best steps while it runs: "R² 0.5234, RMSE 2.141 at 12 rules", "AUC 0.81, accuracy 0.52 · best AUC 0.83
 * (9 terms: 7 rules, 2 linear terms)". */
function metricsCell(job) {
  const { progress, summary } = job;
  const loss = job.loss_info ?? null;
  if (summary && "val_loss" in summary) return `${metricsText(summary, loss, { count: 2 })} at ${termsText(summary)}`;
  if (progress.train_loss === undefined && !progress.best) return "—";
  const best = progress.best ? ` · best ${metricsText(progress.best, loss, { count: 1 })} (${termsText(progress.best)})` : "";
  return `${metricsText(progress, loss, { count: 2 })}${best}`;
}

export async function cancelJob(job) {
  return post(`/v1/jobs/${job.id}/cancel`);
}

function jobColumns(onCancel) {
  return [
    { label: "Job", cell: job => h("span", null, link(`/dashboard/jobs/${job.id}`, idText(job.id)), " ",
                                   h("span", { class: "tag" }, job.kind)) },
    { label: "Status", cell: job => h("span", null, statusBadge(job.status), job.attempt > 1 ? ` attempt ${job.attempt}` : "",
                                      job.error ? h("small", { class: "error-detail" }, `${job.error.type}: ${job.error.detail}`) : null) },
    { label: "Progress", cell: progressMeter },
    { label: "Validation", cell: metricsCell },
    { label: "Dataset", cell: job => (job.spec.dataset_id ?? job.spec.recipe?.dataset_id)
      ? link(`/dashboard/datasets/${job.spec.dataset_id ?? job.spec.recipe.dataset_id}`, "dataset") : "—" },
    { label: "Created", cell: job => formatTime(job.created_at) },
    { label: "Action", cell: job => isActive(job) ? h("button", { type: "button", class: "danger", "data-focus": "cancel",
                                                            onclick: () => onCancel(job) }, "Cancel") : "" },
  ];
}

export function showJobs(main, params, { signal }) {
  const showCells = h("input", { id: "show-cells", type: "checkbox" });
  const message = h("div", { "aria-live": "polite" }); // what went wrong with a cancel or a stream
  const listProblem = h("div");
  const body = h("div");
  const live = h("p", { class: "muted", role: "status" });
  main.append(pageHeading("Jobs"),
    h("div", { class: "toolbar" }, link("/dashboard/jobs/new", "Submit a job"),
      h("label", null, showCells, " show grid cells")), message, listProblem,
    h("section", { class: "card" }, body, live));

  const jobs = new Map(); // id → latest record, newest first
  const streams = new Set();
  const rows = new Map(); // id → its table row
  const columns = jobColumns(async job => {
    try { update(await cancelJob(job)); } catch (error) { message.replaceChildren(problemAlert(error)); }
  });
  const shown = () => [...jobs.values()].filter(job => showCells.checked || !job.parent_id);

  function drawTable() {
    rows.clear();
    const table = dataTable({ rows: shown(), columns, empty: "No job yet: submit one.",
                              rowProps: job => ({ "data-job": job.id }) });
    table.querySelectorAll("tr[data-job]").forEach(row => rows.set(row.dataset.job, row));
    body.replaceChildren(table);
  }

  function update(job) {
    const before = jobs.get(job.id);
    if (before && JSON.stringify(before) === JSON.stringify(job)) return;
    jobs.set(job.id, job);
    const row = rows.get(job.id);
    if (!row) return;
    const hadFocus = row.contains(document.activeElement) ? document.activeElement.dataset.focus : null;
    const fresh = tableRow(columns, job, { "data-job": job.id });
    row.replaceWith(fresh);
    rows.set(job.id, fresh);
    if (hadFocus) fresh.querySelector(`[data-focus="${hadFocus}"]`)?.focus();
  }

  async function follow(job) {
    streams.add(job.id);
    try {
      for await (const event of jobEvents(job.id, signal)) update(event.job);
    } catch (error) {
      message.replaceChildren(problemAlert(error));
    } finally {
      streams.delete(job.id);
    }
  }

  async function refresh() {
    const list = await get("/v1/jobs", signal);
    if (!body.hasChildNodes() || list.map(job => job.id).join() !== [...jobs.keys()].join()) {
      jobs.clear();
      list.forEach(job => jobs.set(job.id, job));
      drawTable();
    } else {
      list.forEach(update);
    }
    for (const job of shown().filter(isActive)) {
      if (streams.size < MAX_STREAMS && !streams.has(job.id)) follow(job);
    }
    live.textContent = streams.size ? `Live: ${streams.size} running or queued ${streams.size === 1 ? "job" : "jobs"} streaming progress.`
      : "No job running.";
  }

  showCells.addEventListener("change", drawTable);
  const tick = async () => {
    try {
      await refresh();
      listProblem.replaceChildren();
    } catch (error) {
      if (error.name !== "AbortError") listProblem.replaceChildren(problemAlert(error));
    }
  };
  tick();
  const timer = setInterval(tick, LIST_REFRESH_MS);
  signal.addEventListener("abort", () => clearInterval(timer));
}
