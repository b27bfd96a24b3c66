// Datasets: upload a table (its target picked from its own columns), list them, read one's schema.

import { get, post } from "./api.js";
import { card, dataTable, definitions, fill, formatBytes, formatCount, formatNumber, formatTime, h, idText, link,
         loadedView, pageHeading, problemAlert } from "./dom.js";
import { columnsOfFile } from "./file-columns.js";
import { field, onSubmit } from "./forms.js";

const datasetName = dataset => dataset.source.filename || dataset.id;
// the upload's task: detected from the target, or declared (the API's `task`)
const TASKS = [["", "detect from the target"], ["regression", "regression (numbers)"],
               ["classification", "classification (two labels)"], ["multiclass", "multiclass (3 or more labels)"],
               ["count", "count (numbers ≥ 0: Poisson)"]];

function uploadForm(navigate) {
  const file = h("input", { type: "file", required: true, accept: ".csv,.gz,.txt,.parquet,.pq,.json" });
  const target = h("select", { required: true, disabled: true }, h("option", { value: "" }, "choose a file first"));
  const typedTarget = h("input", { type: "text", required: true, "data-field": "target" }); // where columns cannot be read
  const columnsProblem = h("div");
  const slot = h("div");
  file.addEventListener("change", async () => {
    columnsProblem.replaceChildren();
    typedTarget.replaceWith(target);
    target.replaceChildren();
    target.disabled = true;
    if (!file.files.length) return;
    try {
      const columns = await columnsOfFile(file.files[0]);
      target.append(...columns.map(name => h("option", { value: name }, name)));
      target.value = columns.at(-1);
      target.disabled = false;
    } catch (error) {
      columnsProblem.replaceChildren(problemAlert(new Error(`The columns of this file could not be read here (${error.message}): `
                                                            + "type the target's name.")));
      typedTarget.id = target.id;
      target.replaceWith(typedTarget);
    }
  });
  const task = h("select", null, TASKS.map(([value, text]) => h("option", { value }, text)));
  const form = h("form", { "aria-label": "Upload a dataset" },
    h("div", { class: "fields" },
      field("Table file", file, { name: "file", help: "CSV (gzipped too), Parquet or JSON records" }),
      field("Target column", target, { name: "target", help: "what to predict; every other column is a feature" }),
      field("Task", task, { name: "task", help: "detected: two values are classification, text labels multiclass, other "
                                                + "numbers regression; counts (≥ 0, fitted with the Poisson loss) are declared" })),
    columnsProblem, h("button", { type: "submit" }, "Upload"), slot);
  onSubmit(form, slot, async () => {
    const body = new FormData();
    body.append("file", file.files[0]);
    body.append("target", (target.isConnected ? target : typedTarget).value);
    if (task.value) body.append("task", task.value);
    const dataset = await post("/v1/datasets", body);
    navigate(`/dashboard/datasets/${dataset.id}`);
  });
  return form;
}

function datasetsTable(datasets) {
  return dataTable({
    caption: "Newest first",
    empty: "No dataset yet: upload one above.",
    rows: datasets,
    columns: [
      { label: "Dataset", cell: d => link(`/dashboard/datasets/${d.id}`, datasetName(d)) },
      { label: "Target", cell: d => d.target },
      { label: "Task", cell: d => d.task + (d.classes && d.task === "multiclass" ? ` (${d.classes.length} classes)` : "") },
      { label: "Rows", numeric: true, cell: d => formatCount(d.n_rows) },
      { label: "Features", numeric: true, cell: d => formatCount(d.n_features) },
      { label: "Uploaded", cell: d => formatTime(d.created_at) },
      { label: "Run", cell: d => link(`/dashboard/jobs/new?dataset=${d.id}`, "new job") },
    ],
  });
}

export function showDatasets(main, params, { navigate, signal }) {
  const list = h("div");
  main.append(pageHeading("Datasets"), card("Upload a table", uploadForm(navigate)), card("Stored datasets", list));
  fill(list, async () => datasetsTable(await get("/v1/datasets", signal)));
}

/** Missing values of an original column (in a categorical one, rows with no category). */
function missingIn(column, dataset) {
  return formatCount(dataset.missing_values[column.name] ?? 0);
}

/** A classification or multiclass target's labels with their rows (class_counts, where the dataset has them). */
function classesTable(dataset) {
  const counts = dataset.class_counts ?? [];
  return dataTable({
    rows: dataset.classes.map((label, k) => ({ label, count: counts[k] })),
    columns: [
      { label: "Class", cell: row => String(row.label) },
      { label: "Rows", numeric: true, cell: row => formatCount(row.count) },
      { label: "Share", numeric: true, cell: row => (row.count === undefined ? "—" : `${formatNumber(100 * row.count / dataset.n_rows, 3)}%`) },
    ],
  });
}

function columnsTable(dataset) {
  return dataTable({
    rows: dataset.columns,
    columns: [
      { label: "Column", cell: c => c.name },
      { label: "Type", cell: c => c.kind },
      { label: "Encoded as", cell: c => (c.kind === "categorical"
        ? h("span", null, `one-hot, ${c.categories.length} categories: `,
            c.categories.map(category => h("span", { class: "tag" }, category)).flatMap(tag => [tag, " "]))
        : "as it is") },
      { label: "Missing values", numeric: true, cell: c => missingIn(c, dataset) },
    ],
  });
}

export function showDataset(main, { datasetId }, { signal }) {
  loadedView(main, "Dataset", async () => {
    const dataset = await get(`/v1/datasets/${encodeURIComponent(datasetId)}`, signal);
    const summary = dataset.target_summary;
    return { title: `Dataset ${datasetName(dataset)}`, content: [
      h("div", { class: "toolbar" }, link(`/dashboard/jobs/new?dataset=${dataset.id}`, "Run a job on this dataset")),
      card("Table",
        definitions([["id", idText(dataset.id)], ["file", dataset.source.filename ?? "(raw body)"],
                     ["format", dataset.source.format], ["size", formatBytes(dataset.source.bytes)],
                     ["rows", formatCount(dataset.n_rows)], ["columns", formatCount(dataset.columns.length)],
                     ["encoded features", formatCount(dataset.n_features)], ["uploaded", formatTime(dataset.created_at)]])),
      card(`Target: ${dataset.target}`, dataset.classes ? [
        definitions([["task", dataset.task, "task"], ["classes", formatCount(dataset.classes.length), "n_classes"]]),
        classesTable(dataset)]
        : definitions([["task", dataset.task, "task"], ["mean", formatNumber(summary.mean)],
                       ["standard deviation", formatNumber(summary.std)], ["min", formatNumber(summary.min)],
                       ["max", formatNumber(summary.max)]])),
      card("Feature columns", columnsTable(dataset)),
    ] };
  });
}
