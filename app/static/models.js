// Models: versions per name, one model's rules and provenance, and scoring a row typed into a form built
// from the training table's original columns.

import { get, post } from "./api.js";
import { batchCard } from "./batch.js";
import { metricsText, survivalCard } from "./chart.js";
import { card, dataTable, definitions, fill, formatCount, formatNumber, formatTime, h, idText, link, loadedView,
         pageHeading } from "./dom.js";
import { deployCard } from "./deploy.js";
import { driftCard, driftFact } from "./drift.js";
import { field, onSubmit } from "./forms.js";
import { classLabels, columnImportance, factorTarget, interceptText, linearTable, logQuantity, longestRule, ruleId,
         rulesTable } from "./rules.js";
import { stepFactPairs } from "./step.js";
import { curveTimes, rowSurvivalChart } from "./survival.js";

const versionColumns = [
  { label: "Version", cell: model => link(`/dashboard/models/${model.id}`, `${model.name} v${model.version}`) },
  { label: "Rules", numeric: true, cell: model => formatCount(model.n_rules) },
  { label: "Validation", cell: model => metricsText(model.metrics, model.loss_info, { count: 2 }) },
  { label: "From", cell: model => link(`/dashboard/jobs/${model.provenance.job_id}/steps/${model.provenance.step}`,
                                       `step ${model.provenance.step} of ${model.provenance.job_id}`) },
  { label: "Promoted", cell: model => formatTime(model.created_at) },
];

/** The versions table's columns with an Aliases column from the name's `aliases` (alias → version). */
const withAliases = aliases => [versionColumns[0], {
  label: "Aliases", cell: model => Object.entries(aliases).filter(([, version]) => version === model.version).map(([alias]) => alias).join(", "),
}, ...versionColumns.slice(1)];

export function showModels(main, params, { signal }) {
  const body = h("div");
  main.append(pageHeading("Models"),
              h("p", { class: "muted" }, "Promote a step from a finished job's page; each name counts its versions, and "
                + "aliases (champion, staging) point apps at one of them."), body);
  fill(body, async () => {
    const [models, names] = await Promise.all([get("/v1/models", signal), get("/v1/registered-models", signal)]);
    if (!models.length) return h("p", { class: "muted" }, "No model yet: open a finished job and promote a step.");
    const aliases = new Map(names.map(registered => [registered.name, registered.aliases]));
    const byName = Map.groupBy(models, model => model.name);
    return [...byName].map(([name, versions]) => card(name, dataTable({ rows: versions, columns: withAliases(aliases.get(name) ?? {}) })));
  });
}

/** The training table's columns that the model's rules and linear terms read, most important first (their share
 * of `ensemble.importance`; table order where it has none), and the others in table order: {used, unused}. */
function columnsByUse(model) {
  // each encoded feature's column: a numeric column is one feature, a text column one indicator per category
  const featureColumn = model.columns.flatMap(column => (column.kind === "categorical" ? column.categories.map(() => column) : [column]));
  const ensemble = model.ensemble;
  const features = [...ensemble.rules.flatMap(rule => rule.conditions), ...(ensemble.linear ?? [])].map(term => term.feature_index);
  const read = new Set(features.map(index => featureColumn[index]));
  const share = column => ensemble.importance?.[column.name] ?? 0;
  return { used: model.columns.filter(column => read.has(column)).sort((a, b) => share(b) - share(a)),
           unused: model.columns.filter(column => !read.has(column)) };
}

/** One input per original column, those the model uses first (with their share of its importance) and the others
 * folded away: categories as a drop-down, numbers as number fields; empty is missing (null), as a folded column is
 * unless it is filled. */
function rowForm(model, onScore) {
  const { used, unused } = columnsByUse(model);
  const share = column => model.ensemble.importance?.[column.name];
  const inputs = [...used, ...unused].map(column => ({ column, control: column.kind === "categorical"
    ? h("select", null, h("option", { value: "" }, "(missing)"), column.categories.map(category => h("option", { value: category }, category)))
    : h("input", { type: "number", step: "any", placeholder: "missing", inputmode: "decimal" }) }));
  const fields = (columns, help) => h("div", { class: "fields" }, inputs.filter(({ column }) => columns.includes(column))
    .map(({ column, control }) => field(column.name, control, { name: `dataframe_records.${column.name}`, help: help(column) })));
  const slot = h("div");
  const form = h("form", { "aria-label": "Score one row" },
    used.length ? fields(used, column => (share(column) === undefined ? null : `${formatNumber(100 * share(column), 3)}% of the importance`))
      : h("p", { class: "muted" }, "The model reads no column: every row gets its intercept."),
    unused.length ? h("details", { class: "unused-columns" },
      h("summary", null, `${unused.length} other ${unused.length === 1 ? "column" : "columns"} the model does not use — optional`),
      fields(unused, () => null)) : null,
    h("button", { type: "submit" }, "Predict"), slot);
  onSubmit(form, slot, async () => {
    const record = Object.fromEntries(inputs.map(({ column, control }) => [column.name,
      control.value === "" ? null : column.kind === "categorical" ? control.value : Number(control.value)]));
    // a Cox model's row also gets its survival curve: S(t | x) where the baseline hazard steps, up to its last time
    const params = model.ensemble.baseline_hazard ? { params: { times: curveTimes(model) } } : {};
    await onScore(await post(`/v1/models/${model.id}/predict?explain=true`, { dataframe_records: [record], ...params }));
  });
  return form;
}

/** A K-class answer's probabilities of one row, each class with a bar, the predicted one first and bold. */
function classProbabilities(classes, row, predicted) {
  const order = classes.map((label, k) => k).sort((a, b) => row[b] - row[a]);
  return h("ul", { class: "class-probabilities", id: "probabilities", "aria-label": "Probability of each class" }, order.map(k => h("li",
    { class: String(classes[k]) === String(predicted) ? "predicted" : null, "data-class": String(classes[k]) },
    h("span", null, String(classes[k])),
    h("span", { class: "bar-track", "aria-hidden": "true" }, h("span", { class: "bar", style: `width:${(100 * row[k]).toFixed(1)}%` })),
    h("span", { class: "mono" }, formatNumber(row[k], 4)))));
}

/** How the rules that fired (and the linear terms, `linear`: what each adds to the first row) make the first row's
 * score: its sum, a log-link model's rate, mean or hazard ratio, a K-class model's per class. */
function breakdown(model, fired, linear) {
  const ensemble = model.ensemble;
  const rules = fired.length === 1 ? "rule" : "rules";
  const terms = linear.length ? ` and ${linear.length} linear ${linear.length === 1 ? "term" : "terms"}` : "";
  const contributions = new Map(ensemble.rules.map((rule, position) => [ruleId(rule, position), rule.contribution]));
  if (classLabels(ensemble)) {
    return `Each class's score is its intercept plus the amounts of the ${fired.length} ${rules} that fired${terms} (their amount per `
      + "class below); the probabilities are their softmax";
  }
  const total = fired.reduce((sum, id) => sum + contributions.get(id), 0) + linear.reduce((sum, amount) => sum + amount, 0);
  if (ensemble.link === "log") {
    return `Base ${logQuantity(ensemble)} ${formatNumber(Math.exp(model.intercept), 5)} × ${formatNumber(Math.exp(total), 5)} from `
      + `${fired.length} ${rules} that fired${terms} (each multiplies the ${factorTarget(ensemble)} by its factor)`;
  }
  return `Intercept ${formatNumber(model.intercept, 6)} ${total < 0 ? "−" : "+"} ${formatNumber(Math.abs(total), 6)} from ${fired.length} `
    + `${rules} that fired${terms}`;
}

/** The prediction of the first row, its probabilities where the model gives them, its survival curve (a Cox
 * model's), and the rules that fired. */
function scoreView(model, answer) {
  const fired = answer.explanations?.[0] ?? [];
  const linear = answer.linear_contributions?.[0] ?? [];
  const prediction = answer.predictions[0];
  const probabilities = answer.probabilities?.[0];
  return [
    h("p", null, model.ensemble.link === "log" ? `Predicted ${logQuantity(model.ensemble)}: ` : "Prediction: ",
      h("span", { class: "prediction", id: "prediction" }, typeof prediction === "number" ? formatNumber(prediction, 6) : String(prediction))),
    Array.isArray(probabilities) ? classProbabilities(answer.classes, probabilities, prediction)
      : probabilities !== undefined ? definitions([[`probability of ${answer.classes[1]}`, formatNumber(probabilities, 4), "probability"]]) : null,
    h("p", { class: "breakdown" }, breakdown(model, fired, linear)),
    answer.survival ? rowSurvivalChart(answer.times, answer.survival[0], { timeLabel: `time (${model.target})` }) : null,
    rulesTable(model.ensemble, { columns: model.columns, only: fired, caption: "Rules that fired for this row" }),
    linear.length ? linearTable(model.ensemble, { amounts: linear, caption: "Linear terms for this row" }) : null,
  ];
}

/** A Cox model's survival card: the curves of its step on its source job's validation rows (their Kaplan–Meier
 * estimate beside the step's mean S(t | x), the worker's), for any promoted step; a job stored before every step had
 * curves has only its selected step's. Nothing for other models, or where the job has been deleted. */
async function survivalSection(model, signal) {
  const source = model.provenance;
  if (!model.ensemble.baseline_hazard) return null;
  // the job or the dataset may have been deleted since: the model's page stands without them
  const [result, dataset] = await Promise.all([get(`/v1/jobs/${source.job_id}/result`, signal).catch(() => null),
                                               get(`/v1/datasets/${source.dataset_id}`, signal).catch(() => null)]);
  if (!result?.survival) return null;
  const selected = source.step === result.selected;
  const curve = selected ? result.survival.model : result.survival.steps?.[source.step];
  if (!curve) {
    const stepLink = link(`/dashboard/jobs/${source.job_id}/steps/${result.selected}`, `step ${result.selected}`);
    return card("Survival", h("p", { class: "muted" }, "The source job was stored with the curves of its selected step only, ",
                              stepLink, `; this model is step ${source.step}. A row's curve is under "Predict one row".`));
  }
  const rows = result.cv ? "rows it was refitted on (in sample)" : `${formatCount(result.n_val)} validation rows`;
  return survivalCard({ ...result.survival, model: curve }, dataset, `This model (step ${source.step}${selected ? ", the selected "
    + "one" : ""} of its job) on the job's ${rows}: their Kaplan–Meier estimate beside the mean of the model's survival curves `
    + "over the same rows. Each rule multiplies the hazard by its factor (its hazard ratio, in the rules below).");
}

export function showModel(main, { modelId }, { signal, navigate }) {
  loadedView(main, "Model", async () => {
    const model = await get(`/v1/models/${encodeURIComponent(modelId)}`, signal);
    const [all, registered] = await Promise.all([get("/v1/models", signal),
                                                 get(`/v1/registered-models/${encodeURIComponent(model.name)}`, signal)]);
    const source = model.provenance;
    const survival = h("div");
    fill(survival, async () => (await survivalSection(model, signal)) ?? []);
    const scored = h("div", { "aria-live": "polite", id: "score" });
    return { title: `Model ${model.name} v${model.version}`, content: [
      h("div", { class: "columns" },
        card("Model", definitions([
          ["id", idText(model.id)], ["name", model.name], ["version", String(model.version)],
          ["aliases", model.aliases.join(", ") || null], ["promoted", formatTime(model.created_at)],
          ["predicts", model.predicts], ["classes", model.classes?.join(", ")],
          ["intercept", h("span", { class: "mono" }, interceptText(model.ensemble))],
          ["longest rule", `${longestRule(model.ensemble)} conditions`], ["drift (last day)", driftFact(model), "drift"],
          ["description", model.description],
          ["from", link(`/dashboard/jobs/${source.job_id}/steps/${source.step}`, `step ${source.step}${source.step === source.selected_step ? " (selected)" : ""}`)],
          ["dataset", link(`/dashboard/datasets/${source.dataset_id}`, idText(source.dataset_id))],
          ["forest", link(`/dashboard/forests/${source.forest_id}`, idText(source.forest_id))],
          ["grid cell", source.grid_cell ? link(`/dashboard/jobs/${source.grid_cell}`, idText(source.grid_cell)) : null]])),
        card("Metrics", h("div", { id: "model-metrics" }, definitions(stepFactPairs(model.metrics, model.loss_info))))),
      survival,
      card("Predict one row", h("p", { class: "muted" }, "The columns the rules and linear terms read, most important first; "
        + "leave a value empty for a missing one."),
        rowForm(model, async answer => scored.replaceChildren(...scoreView(model, answer).filter(Boolean))), scored),
      batchCard(model, { signal }),
      deployCard(model, registered, () => navigate(location.pathname, { replace: true })),
      driftCard(model, signal),
      card(`Rules (${model.n_rules})`, rulesTable(model.ensemble, { columns: model.columns })),
      model.ensemble.linear?.length ? card(`Linear terms (${model.ensemble.linear.length})`, linearTable(model.ensemble)) : null,
      model.ensemble.importance ? card("Columns by importance", columnImportance(model.ensemble.importance)) : null,
      card(`Versions of ${model.name}`, dataTable({ rows: all.filter(other => other.name === model.name), columns: withAliases(registered.aliases),
                                                    rowProps: other => ({ class: other.id === model.id ? "chosen" : null }) })),
    ] };
  });
}
