// Datasets: upload a table (its target picked from its own columns), list them, read one's schema.

import { get, post } from "./api.js";
import { card, dataTable, definitions, fill, formatBytes, formatCount, formatNumber, formatTime, h, idText, link,
         loadedView, pageHeading, problemAlert } from "./dom.js";
import { binaryColumns } from "./event-columns.js";
import { NotATable, columnsOfFile } from "./file-columns.js";
import { field, onSubmit } from "./forms.js";

const datasetName = dataset => dataset.source.filename || dataset.id;
// the upload's task: detected from the target, or declared (the API's `task`)
const TASKS = [["", "detect from the target"], ["regression", "regression (numbers)"],
               ["classification", "classification (two labels)"], ["multiclass", "multiclass (3 or more labels)"],
               ["count", "count (numbers ≥ 0: Poisson)"],
               ["amount", "amount (amounts ≥ 0 with many zeros: Tweedie, Gamma)"],
               ["survival", "survival (time to an event: Cox)"]];
// the tasks whose target may be a rate over an exposure column (the API's `exposure`: Poisson, Tweedie, Gamma), and
// those whose score may take an offset column (the API's `offset`: the log-link losses and squared)
const EXPOSURE_TASKS = ["count", "amount"];
const OFFSET_TASKS = ["regression", "count", "amount"];

/**
 * A column of the chosen file: a drop-down of its columns, or a text input where they cannot be read here.
 * `optional` adds a "none" choice. {element, setColumns(names, chosen), typeInstead(), clear(), value()}.
 */
function columnPicker(name, { optional = false } = {}) {
  const none = () => (optional ? h("option", { value: "" }, "none") : h("option", { value: "" }, "choose a file first"));
  const select = h("select", { required: !optional, disabled: !optional }, none());
  const typed = h("input", { type: "text", required: name === "target", "data-field": name });
  return {
    element: select,
    /** The file's columns to choose from, `chosen` selected: "" (a required picker's prompt `prompt`) chooses none. */
    setColumns(columns, chosen, prompt = null) {
      const first = optional ? [none()] : chosen === "" ? [h("option", { value: "" }, prompt ?? `choose the ${name} column`)] : [];
      select.replaceChildren(...first, ...columns.map(column => h("option", { value: column }, column)));
      select.value = chosen ?? (optional ? "" : columns.at(-1));
      select.disabled = false;
    },
    typeInstead() { typed.id = select.id; select.replaceWith(typed); },
    clear() {
      if (typed.isConnected) typed.replaceWith(select);
      select.replaceChildren(none());
      select.disabled = !optional;
    },
    value: () => (typed.isConnected ? typed : select).value.trim(),
  };
}

/** A column name among `columns` that reads like `words` (the time and event columns of a survival table), if any. */
const likelyColumn = (columns, words) => columns.find(column => words.test(column));
const EVENT_WORDS = /event|status|death|died|dead|censor|fstat/i;
const TIME_WORDS = /time|day|week|month|year|duration|survival|follow|lenfol/i;
const EVENT_HELP = "1 or true where the event happened, 0 or false where the time is censored; preselected only where it is "
  + "clear which column that is";

/** The event column to preselect: among the columns holding only 0/1 or true/false in the file's first rows
 * (`binary`), the one named like an event, else the only one; none where that is unclear (several 0/1 columns: a
 * 0/1 feature is no event column) or the values could not be read (`binary` null): the person picks it. */
function likelyEvent(binary) {
  if (!binary?.length) return "";
  return likelyColumn(binary, EVENT_WORDS) ?? (binary.length === 1 ? binary[0] : "");
}

function uploadForm(navigate) {
  const file = h("input", { type: "file", required: true, accept: ".csv,.gz,.txt,.parquet,.pq,.json" });
  const target = columnPicker("target");
  const event = columnPicker("event");
  const exposure = columnPicker("exposure", { optional: true });
  const offset = columnPicker("offset", { optional: true });
  const columnsProblem = h("div");
  const slot = h("div");
  let columns = [];
  let targetChosen = false; // the person picked the target: the task's change keeps it
  target.element.addEventListener("change", () => { targetChosen = true; });
  file.addEventListener("change", async () => {
    columnsProblem.replaceChildren();
    for (const picker of [target, event, exposure, offset]) picker.clear();
    eventHelp.textContent = `${EVENT_HELP}.`;
    targetChosen = false;
    if (!file.files.length) return;
    try {
      columns = await columnsOfFile(file.files[0]);
      target.setColumns(columns);
      const binary = await binaryColumns(file.files[0], columns).catch(() => null);
      event.setColumns(columns, likelyEvent(binary));
      eventHelp.textContent = `${EVENT_HELP}. ${binary === null ? "The values of this file are not read here: pick it."
        : binary.length ? `Only 0/1 in the first rows: ${binary.join(", ")}.` : "No column holds only 0/1 in the first rows."}`;
      exposure.setColumns(columns, "");
      offset.setColumns(columns, "");
      showTaskColumns();
    } catch (error) {
      if (error instanceof NotATable) { // refused here, as the API would refuse it: no column to offer
        columnsProblem.replaceChildren(problemAlert(error));
        return;
      }
      columnsProblem.replaceChildren(problemAlert(new Error(`The columns of this file could not be read here (${error.message}): `
                                                            + "type the target's name.")));
      for (const picker of [target, event, exposure, offset]) picker.typeInstead();
    }
  });
  const task = h("select", null, TASKS.map(([value, text]) => h("option", { value }, text)));
  const taskField = field("Task", task, { name: "task", wide: true, help: "detected: two values are classification, text labels "
    + "multiclass, other numbers regression; counts (≥ 0, Poisson), amounts (≥ 0, Tweedie or Gamma) and survival times (with "
    + "an event column, Cox) are declared" });
  const eventField = field("Event column", event.element, { name: "event", help: `${EVENT_HELP}.` });
  const eventHelp = eventField.querySelector(".help");
  const exposureField = field("Exposure column (optional)", exposure.element, {
    name: "exposure", help: "> 0 on every row, not a feature: the target is then a rate per unit of exposure" });
  const offsetField = field("Offset column (optional)", offset.element, {
    name: "offset", help: "a number on every row, not a feature, added to each row's score (the log of an exposure, a "
    + "prior model's score): a count or amount model predicts exp(score + offset)" });
  const targetField = field("Target column", target.element, { name: "target", help: "what to predict; every other column is a feature" });
  const showTaskColumns = () => {
    const survival = task.value === "survival";
    // a survival table's target is its time column (one named like a time, unless the person picked it), never the
    // event column
    const others = columns.filter(column => column !== event.value());
    if (survival && columns.length && (target.value() === event.value() || !targetChosen)) {
      target.setColumns(columns, (targetChosen ? null : likelyColumn(others, TIME_WORDS)) ?? (others.includes(target.value())
        ? target.value() : others.at(-1)));
    }
    eventField.hidden = !survival;
    event.element.required = survival;
    exposureField.hidden = !EXPOSURE_TASKS.includes(task.value);
    offsetField.hidden = !OFFSET_TASKS.includes(task.value);
    targetField.querySelector("label").textContent = survival ? "Time column (target)" : "Target column";
  };
  task.addEventListener("change", showTaskColumns);
  event.element.addEventListener("change", showTaskColumns);
  showTaskColumns();
  const form = h("form", { "aria-label": "Upload a dataset" },
    h("div", { class: "fields" }, taskField,
      field("Table file", file, { name: "file", help: "CSV (gzipped too), Parquet or JSON records" }),
      targetField, eventField, exposureField, offsetField),
    columnsProblem, h("button", { type: "submit" }, "Upload"), slot);
  onSubmit(form, slot, async () => {
    const body = new FormData();
    body.append("file", file.files[0]);
    body.append("target", target.value());
    if (task.value) body.append("task", task.value);
    if (task.value === "survival") body.append("event", event.value());
    if (EXPOSURE_TASKS.includes(task.value) && exposure.value()) body.append("exposure", exposure.value());
    if (OFFSET_TASKS.includes(task.value) && offset.value()) body.append("offset", offset.value());
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

/** A numeric target's facts: its task, the event, exposure and offset columns beside it, and its summary; a survival
 * target is stored as signed times (+time where the event happened, -time where censored), so only the longest
 * time reads from it. */
function targetFacts(dataset) {
  const summary = dataset.target_summary;
  const facts = [["task", dataset.task, "task"], ["event column", dataset.event, "event"],
                 ["exposure column", dataset.exposure, "exposure"], ["offset column", dataset.offset, "offset"]];
  if (dataset.task === "survival") return [...facts, ["longest time", formatNumber(Math.max(-summary.min, summary.max))]];
  return [...facts, ["mean", formatNumber(summary.mean)], ["standard deviation", formatNumber(summary.std)],
          ["min", formatNumber(summary.min)], ["max", formatNumber(summary.max)]];
}

export function showDataset(main, { datasetId }, { signal }) {
  loadedView(main, "Dataset", async () => {
    const dataset = await get(`/v1/datasets/${encodeURIComponent(datasetId)}`, signal);
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
        : definitions(targetFacts(dataset))),
      card("Feature columns", columnsTable(dataset)),
    ] };
  });
}
