// The model page's "Drift" card: the rows the model scored (live requests and batch jobs) against its training table,
// rule by rule (firing rate) and column by column (PSI over the training deciles), over a chosen time range, and the
// thresholds that flag them.

import { ApiError, get, put } from "./api.js";
import { timeSeriesChart } from "./chart.js";
import { card, dataTable, fill, formatCount, formatNumber, h } from "./dom.js";
import { field, onSubmit } from "./forms.js";
import { ruleConditions, ruleSentence } from "./rules.js";

const HOUR = 3600;
const RANGES = [[HOUR, "last hour"], [24 * HOUR, "last 24 hours"], [7 * 24 * HOUR, "last 7 days"]];
const SOURCES = [["", "all", "live requests and batch jobs"], ["live", "live", "live requests"], ["batch", "batch", "batch jobs"]];
/** Rules and columns drawn over time where none is flagged: those that moved most. */
const TOP_SERIES = 5;
/** Rules and columns listed in a table before the rest are folded away. */
const SHOWN_ROWS = 10;
/** Flagged rules and columns said in words in the headline before "and N more". */
const SAID = 4;

/** A share as a percent with two significant digits: "4.2%", "19%", "0.031%". */
export function percent(share) {
  if (share === null || share === undefined) return "—";
  return share > 0 && share < 1e-6 ? "< 0.0001%" : `${formatNumber(100 * share, 2)}%`;
}

/** A live/training ratio: "×4.8", "×0.21". */
const ratioText = ratio => (ratio === null || ratio === undefined ? "—" : `×${formatNumber(ratio, 2)}`);

/** A p-value as people write it: "0.042", "3e-12", "< 1e-300" (where the normal tail underflows). */
export function pValueText(p) {
  if (p === null || p === undefined) return "—";
  if (p === 0) return "< 1e-300";
  return p < 1e-3 ? p.toExponential(0) : formatNumber(p, 2);
}

const plural = (count, one, many) => `${formatCount(count)} ${count === 1 ? one : many}`;

/** How far a rule's live rate is from its training rate: |log ratio| (a rule training never fired on that now
 * fires, or one that stopped firing, is as far as can be); -1 where nothing was counted. */
function distance(rule) {
  if (rule.live_rate === null) return -1;
  if (rule.ratio === null) return rule.live_rows > 0 ? Infinity : -1;
  return rule.ratio === 0 ? Infinity : Math.abs(Math.log(rule.ratio));
}

const byFlagThen = measure => (a, b) => (b.drifted - a.drifted) || (measure(b) - measure(a));

/** A rule of the report with its rule of the model (a drift report's rule id is the rule's position). */
const withRule = (model, figures) => ({ ...figures, id: `r${figures.rule}`, text: ruleSentence(model.ensemble, model.ensemble.rules[figures.rule] ?? { conditions: [] }, { columns: model.columns }) });

/** A rule's drift in words: "r3 (Shell_weight > 0.24) fired on 4% of training rows and on 19% of these rows (×4.8,
 * p = 3e-12)". */
function ruleWords(rule) {
  const rates = rule.training_rate === 0 ? `never fired on training rows and fired on ${percent(rule.live_rate)} of these rows`
    : `fired on ${percent(rule.training_rate)} of training rows and on ${percent(rule.live_rate)} of these rows (${ratioText(rule.ratio)}, `
      + `p ${rule.p_value === 0 ? "" : "= "}${pValueText(rule.p_value)})`;
  return [h("strong", null, rule.id), ` (${rule.text}) ${rates}.`];
}

/** The bin of a column whose share moved most, with both shares. */
function movedBin(column) {
  const total = column.live_rows.reduce((sum, rows) => sum + rows, 0) || 1;
  const shares = column.live_rows.map(rows => rows / total);
  const moved = shares.map((share, k) => Math.abs(share - column.training_shares[k]));
  const k = moved.indexOf(Math.max(...moved));
  return { label: column.bins[k], live: shares[k], training: column.training_shares[k] };
}

/** A column's drift in words: its PSI and the bin that moved most, its unseen levels where there are. */
function columnWords(column, thresholds) {
  const bin = movedBin(column);
  const where = bin.label === "missing" ? "are missing" : `fall in its bin ${bin.label}`;
  const flaggedAt = (value, threshold, text) => (value !== null && value >= threshold ? ` (flagged from ${text})` : "");
  const unseen = column.unseen_share ? `; ${percent(column.unseen_share)} of the rows sent were refused for a level training never had`
    + flaggedAt(column.unseen_share, thresholds.unseen_share, percent(thresholds.unseen_share)) : "";
  return [h("strong", null, column.column), `: PSI ${formatNumber(column.psi, 2)}${flaggedAt(column.psi, thresholds.psi, formatNumber(thresholds.psi, 3))}; `
    + `${percent(bin.live)} of these rows ${where}, against ${percent(bin.training)} of training rows${unseen}.`];
}

/** Sentences about the first `SAID` of `items`, and how many more there are. */
const someOf = (items, words) => [...items.slice(0, SAID).map(item => h("li", null, words(item))),
                                   items.length > SAID ? h("li", { class: "muted" }, `and ${items.length - SAID} more, in the tables below`) : null];

function headline(report, rules, columns, words) {
  const flaggedRules = rules.filter(rule => rule.drifted);
  const flaggedColumns = columns.filter(column => column.drifted);
  const { thresholds } = report;
  const counted = `${plural(report.rows, "row", "rows")} counted in the ${words.range} (${words.source}). `;
  let verdict;
  if (report.rows < thresholds.min_rows) {
    verdict = `Nothing is flagged before ${plural(thresholds.min_rows, "row is", "rows are")} counted (the thresholds' min rows).`;
  } else if (!flaggedRules.length && !flaggedColumns.length) {
    verdict = `No rule and no column is flagged: every rule fires as often as on the training table (within ×${formatNumber(thresholds.firing_ratio, 3)}) `
      + `and every column's PSI is under ${formatNumber(thresholds.psi, 3)}.`;
  } else {
    verdict = `${formatCount(flaggedRules.length)} of ${plural(rules.length, "rule", "rules")} and ${formatCount(flaggedColumns.length)} of `
      + `${plural(columns.length, "column", "columns")} ${flaggedRules.length + flaggedColumns.length === 1 ? "is" : "are"} flagged.`;
  }
  return [
    h("p", { class: "drift-headline", id: "drift-headline" }, counted, h("strong", null, verdict),
      thresholds.enabled ? null : " Counting is off for this model: the rows it scores now are not counted (see the thresholds below)."),
    flaggedRules.length || flaggedColumns.length ? h("ul", { class: "drift-findings" },
      someOf(flaggedColumns, column => columnWords(column, thresholds)), someOf(flaggedRules, ruleWords)) : null,
  ];
}

const flagCell = item => (item.drifted ? h("span", { class: "tag flagged" }, "flagged") : "");

/** A table of `rows`, the first SHOWN_ROWS shown and the rest folded away under `more`. */
function foldedTable(rows, columns, rowProps, more) {
  if (rows.length <= SHOWN_ROWS + 2) return dataTable({ rows, columns, rowProps });
  return [dataTable({ rows: rows.slice(0, SHOWN_ROWS), columns, rowProps }),
          h("details", null, h("summary", null, `${rows.length - SHOWN_ROWS} ${more}`), dataTable({ rows: rows.slice(SHOWN_ROWS), columns, rowProps }))];
}

function rulesTableOf(model, rules) {
  return foldedTable(rules, [
    { label: "Rule", cell: rule => rule.id },
    { label: "Conditions", wide: true, cell: rule => ruleConditions(model.ensemble, model.ensemble.rules[rule.rule] ?? { conditions: [] }, { columns: model.columns }) },
    { label: "Training rate", numeric: true, cell: rule => percent(rule.training_rate) },
    { label: "Live rate", numeric: true, cell: rule => percent(rule.live_rate) },
    { label: "Ratio", numeric: true, cell: rule => ratioText(rule.ratio) },
    { label: "p-value", numeric: true, cell: rule => pValueText(rule.p_value) },
    { label: "Flag", cell: flagCell },
  ], rule => ({ "data-rule": rule.rule, class: rule.drifted ? "flagged" : null }), "more rules, moved less");
}

function columnsTableOf(columns) {
  return foldedTable(columns, [
    { label: "Column", cell: column => column.column },
    { label: "PSI", numeric: true, cell: column => formatNumber(column.psi, 2) },
    { label: "Missing (live vs training)", numeric: true, cell: column => `${percent(column.missing_share)} vs ${percent(column.training_missing_share)}` },
    { label: "Unseen levels", numeric: true, cell: column => (column.kind === "categorical" ? percent(column.unseen_share) : "—") },
    { label: "Flag", cell: flagCell },
  ], column => ({ "data-column": column.column, class: column.drifted ? "flagged" : null }), "more columns, moved less");
}

/** A flagged column's bins: each bin's share of training rows beside its share of these rows, as a bar pair. */
function binsFigure(column) {
  const total = column.live_rows.reduce((sum, rows) => sum + rows, 0) || 1;
  const largest = Math.max(...column.training_shares, ...column.live_rows.map(rows => rows / total)) || 1;
  const bar = (share, side) => h("span", { class: `bar ${side}`, style: `width:${(100 * share / largest).toFixed(1)}%` });
  return h("figure", { class: "bins", "data-column": column.column },
    h("figcaption", null, h("strong", null, column.column), `: share of rows per ${column.kind === "numeric" ? "training decile" : "level"}, training against these rows`),
    h("ul", { "aria-label": `${column.column}: rows per bin` }, column.bins.map((label, k) => {
      const live = column.live_rows[k] / total, training = column.training_shares[k];
      return h("li", null, h("span", { class: "mono bin-label" }, label),
        h("span", { class: "bar-pair", "aria-hidden": "true" }, bar(training, "training"), bar(live, "live")),
        h("span", { class: "mono" }, `${percent(training)} → ${percent(live)}`));
    })));
}

/** A point's period in words: "hour", "2 hours", "minute", "12 minutes". */
function periodText(seconds) {
  const [size, unit] = seconds >= HOUR ? [seconds / HOUR, "hour"] : [seconds / 60, "minute"];
  return size === 1 ? unit : `${formatNumber(size, 3)} ${unit}s`;
}

/** The report's points in time as a dot's tooltip shows them. */
const pointTime = (report, k) => new Date(report.series.starts[k] * 1000).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "short" });

/** The rules' firing ratios and the columns' PSI over time: the flagged ones, or those that moved most. */
function charts(report, rules, columns) {
  const { series, thresholds } = report;
  const chosen = (items, measure) => {
    const flagged = items.filter(item => item.drifted);
    return flagged.length ? flagged : items.filter(item => measure(item) > 0).slice(0, TOP_SERIES);
  };
  const shownRules = chosen(rules, distance);
  const shownColumns = chosen(columns, column => column.psi ?? -1);
  const rowsAt = k => plural(series.rows[k], "row", "rows");
  const common = { since: report.since, until: report.until, starts: series.starts, resolution: report.resolution_seconds };
  const index = new Map(report.columns.map((column, j) => [column.column, j]));
  const ruleChart = timeSeriesChart({
    ...common, yTitle: "live / training firing rate",
    title: "Each shown rule's firing rate on these rows over its rate on the training rows, over time",
    lines: shownRules.map(rule => ({ label: `${rule.id} (${rule.text})`, values: series.rule_ratios[rule.rule],
                                     title: k => `${rule.id} at ${pointTime(report, k)}: ${ratioText(series.rule_ratios[rule.rule][k])} (${rowsAt(k)})` })),
    thresholds: [{ value: thresholds.firing_ratio, label: `×${formatNumber(thresholds.firing_ratio, 3)} threshold` },
                 { value: 1 / thresholds.firing_ratio, label: `×${formatNumber(1 / thresholds.firing_ratio, 2)} threshold` }],
  });
  const columnChart = timeSeriesChart({
    ...common, yTitle: "PSI",
    title: "Each shown column's population stability index against the training deciles, over time",
    lines: shownColumns.map(column => ({ label: column.column, values: series.column_psi[index.get(column.column)],
                                         title: k => `${column.column} at ${pointTime(report, k)}: PSI ${formatNumber(series.column_psi[index.get(column.column)][k], 2)} (${rowsAt(k)})` })),
    thresholds: [{ value: thresholds.psi, label: `PSI ${formatNumber(thresholds.psi, 3)} threshold` }],
  });
  const points = `one point per ${periodText(report.resolution_seconds)}`;
  return h("div", { class: "columns drift-charts" },
    h("figure", { class: "drift-chart", id: "drift-rules-chart" },
      h("figcaption", null, h("strong", null, "Rules: live / training firing rate"), ` — ${rules.some(rule => rule.drifted) ? "the flagged rules" : "the rules that moved most"}, ${points}`),
      shownRules.length ? ruleChart : h("p", { class: "muted" }, "No rule has a rate to compare.")),
    h("figure", { class: "drift-chart", id: "drift-columns-chart" },
      h("figcaption", null, h("strong", null, "Columns: PSI"), ` — ${columns.some(column => column.drifted) ? "the flagged columns" : "the columns that moved most"}, ${points}`),
      shownColumns.length ? columnChart : h("p", { class: "muted" }, "No column moved.")));
}

/** Before any row is counted: how rows get counted. */
function emptyState(model, report, words) {
  const code = text => h("code", null, text);
  return h("div", { class: "empty-state", id: "drift-empty" },
    h("p", null, h("strong", null, `No scored row counted in the ${words.range} (${words.source}).`),
      report.thresholds.enabled ? null : " Counting is off for this model: tick “Count scored rows” below."),
    h("p", null, "Every row the model scores is counted: which rules fire on it and which training decile (or level) each of its "
      + "columns falls in. Rows get counted when the model is scored by"),
    h("ul", null,
      h("li", null, code(`POST /v1/models/${model.id}/predict`), " (the “Predict one row” form above too)"),
      h("li", null, "MLflow's ", code(`POST /v1/registered-models/${model.name}/versions/${model.version}/invocations`), " (or by an alias)"),
      h("li", null, "the Open Inference Protocol, ", code(`POST /v2/models/${model.name}/versions/${model.version}/infer`)),
      h("li", null, "batch jobs, ", code(`POST /v1/models/${model.id}/batch`), " (source “batch”)")),
    h("p", { class: "muted" }, "Counts reach this card within seconds of scoring; then each rule's firing rate and each column's bins are "
      + "compared with the training table's."));
}

function reportView(model, report, words) {
  if (report.rows === 0) return emptyState(model, report, words);
  const rules = report.rules.map(rule => withRule(model, rule)).sort(byFlagThen(distance));
  const columns = [...report.columns].sort(byFlagThen(column => column.psi ?? -1));
  const flagged = columns.filter(column => column.drifted);
  return [
    headline(report, rules, columns, words),
    charts(report, rules, columns),
    h("h3", null, "Rules"),
    h("p", { class: "muted" }, "How often each rule fires on these rows against the training rows; p: the two-proportion test of the "
      + "counts. Flagged rules first, then by how far the ratio is from ×1."),
    rulesTableOf(model, rules),
    h("h3", null, "Columns"),
    h("p", { class: "muted" }, "PSI: the population stability index of the column's rows over its training deciles (or levels) and a "
      + "missing bin; 0.1 is a moderate and 0.25 a large shift."),
    columnsTableOf(columns),
    flagged.length ? [h("h3", null, "Bins of the flagged columns"),
                      h("ul", { class: "legend" }, h("li", null, h("span", { class: "swatch", style: "border-color:var(--train)" }), "training rows"),
                        h("li", null, h("span", { class: "swatch", style: "border-color:var(--validation)" }), "these rows")),
                      h("div", { class: "bins-grid" }, flagged.map(binsFigure))] : null,
  ];
}

/** The range and source pickers, each a labelled drop-down. */
function picker(id, label, options, value, onChange) {
  return h("span", { class: "field-inline" }, h("label", { for: id }, `${label} `),
    h("select", { id, onchange: event => onChange(event.target.value) },
      options.map(([optionValue, text]) => h("option", { value: String(optionValue), selected: String(optionValue) === String(value) }, text))));
}

const NUMBERS = [
  ["psi", "PSI", "a column is flagged at this population stability index or above", "any"],
  ["firing_ratio", "Firing ratio", "a rule is flagged where live/training is at least this, or at most its inverse", "any"],
  ["p_value", "p-value", "… and the two-proportion test's p-value is below this", "any"],
  ["unseen_share", "Unseen share", "a column is flagged where this share of rows had a level training never had", "any"],
  ["min_rows", "Min rows", "nothing is flagged before this many rows are counted", 1],
];

/** The thresholds form: PUT /monitoring, then `onSaved()`; a 422 shows each field's message beside it. */
function thresholdsForm(model, thresholds, onSaved) {
  const enabled = h("input", { type: "checkbox", id: "drift-enabled", checked: thresholds.enabled, "data-field": "enabled" });
  const inputs = NUMBERS.map(([name, label, help, step]) => [name, field(label, h("input", {
    type: "number", step, value: String(thresholds[name]), inputmode: "decimal" }), { name, help })]);
  const slot = h("div", { "aria-live": "polite" });
  const form = h("form", { "aria-label": "Drift thresholds", class: "thresholds-form" },
    h("div", { class: "choices" }, h("label", null, enabled, " Count scored rows")),
    h("div", { class: "fields" }, inputs.map(([, element]) => element)),
    h("button", { type: "submit" }, "Save thresholds"), slot);
  onSubmit(form, slot, async () => {
    const value = name => form.querySelector(`[data-field="${name}"]`).value;
    const body = { enabled: enabled.checked, ...Object.fromEntries(NUMBERS.map(([name]) => [name, value(name) === "" ? null : Number(value(name))])) };
    await put(`/v1/models/${encodeURIComponent(model.id)}/monitoring`, body);
    slot.replaceChildren(h("p", { class: "notice", role: "status" }, "Thresholds saved; the report below is drawn again with them."));
    onSaved();
  });
  return form;
}

/** The model document's drift flags (its `drift`: the last day's) in words, a link to the card; null without a
 * training profile. */
export function driftFact(model) {
  const drift = model.drift;
  if (!drift) return null;
  const flagged = [...drift.drifted_columns, ...drift.drifted_rules.map(rule => `r${rule}`)];
  const text = !drift.rows ? "no row counted in the last day"
    : flagged.length ? `${flagged.slice(0, 3).join(", ")}${flagged.length > 3 ? ` and ${flagged.length - 3} more` : ""} flagged in `
      + plural(drift.rows, "row", "rows")
      : `nothing flagged in ${plural(drift.rows, "row", "rows")}`;
  // a button, not a "#drift" link: the dashboard's router takes every click on a link to this page
  return h("button", { type: "button", class: flagged.length ? "link-like drift-fact flagged" : "link-like drift-fact",
                       onclick: () => document.getElementById("drift")?.scrollIntoView({ behavior: "smooth" }) }, text);
}

/** The "Drift" card of `model`: a report of its scored rows over a chosen range and source, and its thresholds. */
export function driftCard(model, signal) {
  const state = { span: 24 * HOUR, source: "" };
  const body = h("div", { class: "drift-report" });
  const words = () => ({ range: RANGES.find(([span]) => span === state.span)[1],
                         source: SOURCES.find(([source]) => source === state.source)[2] });
  const draw = () => fill(body, async () => {
    const until = Math.floor(Date.now() / 1000);
    const query = new URLSearchParams({ since: String(until - state.span), until: String(until), ...(state.source ? { source: state.source } : {}) });
    try {
      return reportView(model, await get(`/v1/models/${encodeURIComponent(model.id)}/drift?${query}`, signal), words());
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      return h("p", { class: "muted" }, "This model has no training profile (its training dataset is no longer stored), so the rows it "
        + "scores cannot be compared with the training table.");
    }
  });
  const thresholds = h("div");
  fill(thresholds, async () => thresholdsForm(model, await get(`/v1/models/${encodeURIComponent(model.id)}/monitoring`, signal), draw));
  const section = card("Drift",
    h("p", { class: "muted" }, "The rows this model scored, against its training table: how often each rule fires, and how each column's "
      + "values spread over its training deciles (PSI)."),
    h("div", { class: "toolbar" },
      picker("drift-range", "Range", RANGES.map(([span, text]) => [span, text]), state.span, value => { state.span = Number(value); draw(); }),
      picker("drift-source", "Rows", SOURCES.map(([source, text]) => [source, text]), state.source, value => { state.source = value; draw(); }),
      h("button", { type: "button", class: "secondary", onclick: draw }, "Refresh")),
    body,
    h("details", { class: "drift-thresholds", open: true }, h("summary", null, "Thresholds"), thresholds));
  section.id = "drift";
  draw();
  return section;
}
