// Batch scoring: a CSV or Parquet file scored by a model in chunk jobs on the workers, from the model's page
// (pick the file, watch rows and chunks arrive, download the scored rows as Parquet or CSV, or cancel), and the
// page of a batch job (its model, rows, chunks, time and download) in place of a path job's.

import { download, get, post } from "./api.js";
import { card, definitions, formatCount, formatDuration, formatNumber, formatTime, h, idText, link, pageHeading,
         problemAlert, statusBadge } from "./dom.js";
import { field, onSubmit } from "./forms.js";

const POLL_MS = 500; // a batch's progress is counted from its chunk jobs' records: read again this often
const enc = encodeURIComponent;
const active = view => view.status === "queued" || view.status === "running";

/** Where a batch stands in words: "1,200 of 2,000 rows · 2 of 4 chunks", and the failed chunks where any. */
function countsText(view) {
  const { n_rows: rows, n_chunks: chunks, rows_done: rowsDone, chunks_done: chunksDone, chunks_failed: failed } = view.batch;
  return `${formatCount(rowsDone)} of ${formatCount(rows)} rows · ${formatCount(chunksDone)} of ${formatCount(chunks)} `
    + `${chunks === 1 ? "chunk" : "chunks"}` + (failed ? ` · ${formatCount(failed)} failed` : "");
}

/** A progress bar over the rows scored, and its text. */
function progressBar(view) {
  const { n_rows: rows, rows_done: done } = view.batch;
  return h("div", { class: "progress-cell" },
    h("progress", { max: Math.max(rows, 1), value: done, "aria-label": `${view.id} rows scored` }),
    h("small", { "data-field": "batch-progress" }, countsText(view)));
}

/** The time a batch took, from its submission to its end (or to now while it runs). */
function elapsed(view) {
  const end = view.finished_at ?? (active(view) ? Date.now() / 1000 : null);
  return end === null ? null : formatDuration(end - view.created_at);
}

/** Download buttons of a succeeded batch's scored rows, each format; a problem shows beside them. */
function downloads(view) {
  const slot = h("div");
  const button = (format, label) => h("button", { type: "button", class: format === view.spec.output_format ? null : "secondary",
    onclick: async () => {
      slot.replaceChildren();
      try {
        await download(`${view.links.result}?format=${format}`, `${view.id}.${format}`);
      } catch (error) {
        slot.replaceChildren(problemAlert(error));
      }
    } }, label);
  return h("div", { class: "downloads", id: "batch-downloads" },
    button("parquet", "Download Parquet"), button("csv", "Download CSV"),
    h("p", { class: "muted" }, `${formatCount(view.batch.n_rows)} scored rows: row (its number in the file), `
      + `${view.spec.id_column ? `${view.spec.id_column}, ` : ""}prediction and the model's other outputs.`), slot);
}

/** What a batch job ended with: the downloads, why it failed, or when it was canceled; nothing while it runs. */
function outcome(view) {
  if (view.status === "succeeded") return downloads(view);
  if (view.status === "failed") {
    return h("div", { class: "problem", role: "alert" },
      h("p", null, h("strong", null, `${view.error?.type ?? "Failed"}: `), view.error?.detail ?? "the batch failed"),
      h("p", null, "A failed batch has no result: fix the file and score it again."));
  }
  if (view.status === "canceled") return h("p", null, `Canceled ${formatTime(view.finished_at)}: its chunks and stored rows are deleted.`);
  return null;
}

/** The facts of a batch job: its model, file, rows, chunks, options and times. */
function facts(view) {
  const spec = view.spec;
  return definitions([
    ["status", statusBadge(view.status), "status"],
    ["model", link(`/dashboard/models/${spec.model_id}`, `${spec.model_name} v${spec.model_version}`), "model"],
    ["file", spec.source.startsWith("dataset:") ? link(`/dashboard/datasets/${spec.source.slice(8)}`, spec.source) : spec.source, "source"],
    ["rows", formatCount(view.batch.n_rows), "n_rows"],
    ["rows scored", formatCount(view.batch.rows_done), "rows_done"],
    ["chunks", `${formatCount(view.batch.n_chunks)} of ≤${formatCount(spec.chunk_rows)} rows each`, "n_chunks"],
    ["chunks done", formatCount(view.batch.chunks_done), "chunks_done"],
    ["chunks failed", view.batch.chunks_failed ? formatCount(view.batch.chunks_failed) : null, "chunks_failed"],
    ["format", spec.output_format, "output_format"],
    ["explanations", spec.explain ? "rules that fired and what each adds" : null],
    ["survival at times", spec.times?.map(t => formatNumber(t)).join(", ") ?? null, "times"],
    ["id column", spec.id_column],
    ["submitted", formatTime(view.created_at)],
    ["started", view.started_at ? formatTime(view.started_at) : null],
    ["finished", view.finished_at ? formatTime(view.finished_at) : null],
    ["time (submitted to finished)", elapsed(view), "elapsed"],
  ]);
}

/** Read a batch job every POLL_MS while it is active, calling `show(view)` with each answer, until `signal`. */
async function follow(view, show, signal) {
  show(view);
  while (active(view) && !signal?.aborted) {
    await new Promise(resolve => setTimeout(resolve, POLL_MS));
    if (signal?.aborted) return;
    view = await get(view.links.self, signal);
    show(view);
  }
}

/** A Cancel button for an active batch; `show` gets the canceled job's view, `fail` a problem. */
function cancelButton(view, show, fail) {
  return h("button", { type: "button", class: "danger", onclick: async event => {
    event.target.disabled = true;
    try { show(await post(view.links.cancel)); } catch (error) { fail(error); }
  } }, "Cancel");
}

/** One batch on the model's page: its progress (rows and chunks), a Cancel button while it runs, the downloads once
 * done, and a link to its job page. */
function batchStatus(view, signal) {
  const element = h("div", { id: "batch", "aria-live": "polite" });
  const problem = h("div");
  const show = current => {
    view = current;
    element.replaceChildren(...[
      h("p", null, statusBadge(current.status), " ", link(`/dashboard/jobs/${current.id}`, "batch job ", idText(current.id)),
        active(current) ? ` · ${elapsed(current)} so far` : ` · took ${elapsed(current)}`),
      progressBar(current),
      active(current) ? cancelButton(current, show, error => problem.replaceChildren(problemAlert(error))) : null,
      outcome(current), problem].filter(Boolean)); // replaceChildren would show a null as "null"
  };
  follow(view, show, signal).catch(error => {
    if (error.name !== "AbortError") problem.replaceChildren(problemAlert(error));
  });
  return element;
}

/** The query of a batch submission from the form's options: rows per chunk, explanations, an id column, times. */
function batchQuery({ chunkRows, explain, idColumn, times }) {
  const query = new URLSearchParams();
  if (chunkRows) query.set("chunk_rows", chunkRows);
  if (explain) query.set("explain", "true");
  if (idColumn) query.set("id_column", idColumn);
  for (const time of times) query.append("times", time);
  return query.toString();
}

/** The model page's "Score a file" card: pick a CSV or Parquet file in the model's original columns, submit it as a
 * batch job, and follow it there. */
export function batchCard(model, { signal }) {
  const file = h("input", { type: "file", required: true, accept: ".csv,.txt,.parquet,.pq" });
  const chunkRows = h("input", { type: "number", min: 1, step: 1, placeholder: "the service's default", inputmode: "numeric" });
  const explain = h("input", { type: "checkbox" });
  const idColumn = h("input", { type: "text", placeholder: "none" });
  const survival = Boolean(model.ensemble.baseline_hazard);
  const times = h("input", { type: "text", placeholder: "none, e.g. 30, 365", inputmode: "decimal" });
  const slot = h("div");
  const status = h("div");
  const form = h("form", { "aria-label": "Score a file" },
    h("div", { class: "fields" },
      field("File to score", file, { name: "file", wide: true, help: "CSV (a header line of column names) or Parquet, in the "
        + "training table's original columns, each once (its exposure, offset and id columns may be there too; no other)" }),
      field("Rows per chunk", chunkRows, { name: "chunk_rows", help: "each chunk is one job on the workers" }),
      field("Id column", idColumn, { name: "id_column", help: "a column copied into the result beside row, to match rows" }),
      survival ? field("Survival at times", times, { name: "times", help: "S(t | x) at these times (comma-separated), up to "
        + `${formatNumber(model.ensemble.baseline_hazard.times.at(-1))}, the training rows' last follow-up` }) : null,
      h("div", { class: "field" }, h("span", { class: "label" }, "Explanations"),
        h("div", { class: "choices" }, h("label", null, explain, " the rules that fired for each row and what each adds")))),
    h("button", { type: "submit" }, "Score the file"), slot);
  onSubmit(form, slot, async () => {
    const body = new FormData();
    body.append("file", file.files[0]);
    const timeList = times.value.split(",").map(text => text.trim()).filter(Boolean);
    const query = batchQuery({ chunkRows: chunkRows.value, explain: explain.checked, idColumn: idColumn.value.trim(), times: timeList });
    const view = await post(`/v1/models/${enc(model.id)}/batch${query ? `?${query}` : ""}`, body);
    status.replaceChildren(batchStatus(view, signal));
  });
  return card("Score a file", h("p", { class: "muted" }, "Score every row of a file in chunk jobs on the workers, then "
    + "download the scored rows as Parquet or CSV: the predictions /predict gives for the same rows."), form, status);
}

/** The page of a batch job (`job`: its /v1/jobs record): its facts, live progress, Cancel, and the downloads. */
export function showBatchJob(main, job, { signal }) {
  const heading = pageHeading(`Batch job ${job.id}`);
  const cancelSlot = h("span");
  const problem = h("div", { "aria-live": "polite" });
  const progress = h("div", { "aria-live": "polite" });
  const result = h("div");
  const details = h("div");
  main.replaceChildren(h("div", { class: "heading-row" }, heading, cancelSlot), problem,
                       card("Progress", progress), result, card("Batch", details));
  const fail = error => problem.replaceChildren(problemAlert(error));
  const show = view => {
    progress.replaceChildren(progressBar(view));
    details.replaceChildren(facts(view));
    result.replaceChildren(...[outcome(view)].filter(Boolean).map(element => card("Result", element)));
    cancelSlot.replaceChildren(active(view) ? cancelButton(view, show, fail) : "");
  };
  progress.replaceChildren(h("p", { class: "muted", role: "status" }, "Loading…"));
  get(`/v1/models/batch/${enc(job.id)}`, signal).then(view => follow(view, show, signal)).catch(error => {
    if (error.name !== "AbortError") fail(error);
  });
}

/** The page of one chunk job of a batch: which rows it scored, and its batch. */
export function showBatchChunk(main, job) {
  const spec = job.spec;
  main.replaceChildren(pageHeading(`Chunk ${spec.chunk} of batch ${spec.batch_id}`), card("Chunk", definitions([
    ["status", statusBadge(job.status), "status"],
    ["batch", link(`/dashboard/jobs/${spec.batch_id}`, idText(spec.batch_id)), "batch"],
    ["model", link(`/dashboard/models/${spec.model_id}`, idText(spec.model_id))],
    ["rows", `${formatCount(spec.n_rows)} (rows ${formatCount(spec.first_row)} to ${formatCount(spec.first_row + spec.n_rows - 1)} of the file)`, "rows"],
    ["error", job.error ? `${job.error.type}: ${job.error.detail}` : null],
    ["started", job.started_at ? formatTime(job.started_at) : null],
    ["finished", job.finished_at ? formatTime(job.finished_at) : null],
    ["time", job.finished_at && job.started_at ? formatDuration(job.finished_at - job.started_at) : null],
  ])));
}
