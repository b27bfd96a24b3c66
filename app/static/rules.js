// Rules in words: a rule's conditions as people read them and a table of a rule ensemble's rules.

import { dataTable, formatCount, formatNumber, formatSigned, h } from "./dom.js";

/** Encoded feature name → {column, category}: its column of the table's encoding, and the level of a one-hot
 * indicator. */
function featureColumns(columns = []) {
  return new Map(columns.flatMap(column => (column.kind === "categorical"
    ? column.categories.map(category => [`${column.name}=${category}`, { column, category }])
    : [[column.name, { column }]])));
}

/** A threshold as the rule text shows it: at the precision that separates the training values, where known. */
const threshold = bound => (bound.display_threshold !== undefined ? String(bound.display_threshold) : formatNumber(bound.threshold, 5));

/** A rule's id: its `id` (fire-rules v2), else its position. */
export const ruleId = (rule, position) => rule.id ?? position;

/** One condition, or a feature's two bounds, in words: "Sex is not I", "0.11 < Height ≤ 0.16", and whether a
 * missing value satisfies it too (said only where the column can be missing). */
function conditionText(bounds, features) {
  const known = features.get(bounds[0].feature);
  if (known?.category !== undefined && bounds.length === 1 && bounds[0].threshold >= 0 && bounds[0].threshold < 1) {
    return [`${known.column.name} is ${bounds[0].operator === ">" ? "" : "not "}${known.category}`, false];
  }
  const lower = bounds.find(bound => bound.operator === ">");
  const upper = bounds.find(bound => bound.operator === "<=");
  const name = bounds[0].feature;
  const text = lower && upper ? `${threshold(lower)} < ${name} ≤ ${threshold(upper)}`
    : lower ? `${name} > ${threshold(lower)}` : `${name} ≤ ${threshold(upper)}`;
  return [text, (known?.column.missing ?? true) && bounds.every(bound => bound.missing)];
}

/** A rule's conditions in words, one feature per line. */
function conditionList(conditions, features) {
  const byFeature = new Map();
  for (const condition of conditions) byFeature.set(condition.feature, [...(byFeature.get(condition.feature) ?? []), condition]);
  return h("ul", { class: "conditions" }, [...byFeature.values()].map((bounds, i) => {
    const [text, orMissing] = conditionText(bounds, features);
    return h("li", null, i ? "and " : "if ", text, orMissing ? h("span", { class: "or-missing" }, " or missing") : null);
  }));
}

function contributionCell(contribution, largest) {
  const width = largest ? Math.max(2, Math.round(48 * Math.abs(contribution) / largest)) : 0;
  return h("span", { class: "contribution" },
    h("span", { class: `bar ${contribution >= 0 ? "up" : "down"}`, style: `width:${width}px`, "aria-hidden": "true" }),
    h("span", { class: "mono" }, formatSigned(contribution, 5)));
}

const ORDERS = {
  contribution: (a, b) => Math.abs(b.rule.contribution) - Math.abs(a.rule.contribution),
  tree: (a, b) => (a.rule.tree - b.rule.tree) || (a.rule.leaf - b.rule.leaf),
};

/**
 * The rules of a `fire-rules` document as a table: id (as the API's explanations give it), conditions in
 * words, contribution, weight and leaf value, support and the leaves it comes from. `columns` (the table's
 * encoding) puts one-hot conditions in words where the document does not carry its own; `onTree(t)` makes
 * each tree a button; `only` limits the table to these rule ids.
 */
export function rulesTable(ensemble, { columns = [], onTree = null, only = null, order = "contribution", caption } = {}) {
  const features = featureColumns(ensemble.columns ?? columns);
  const largest = Math.max(0, ...ensemble.rules.map(rule => Math.abs(rule.contribution)));
  const rows = ensemble.rules.map((rule, position) => ({ rule, id: ruleId(rule, position) }))
    .filter(row => only === null || only.includes(row.id))
    .sort(ORDERS[order]);
  const leafText = member => `tree ${member.tree} leaf ${member.leaf}`;
  return dataTable({
    caption,
    empty: "No rule: this step predicts the intercept alone.",
    rows,
    rowProps: ({ id }) => ({ "data-rule": id }),
    columns: [
      { label: "Rule", cell: ({ id }) => `#${id}` },
      { label: "Conditions", wide: true, cell: ({ rule }) => conditionList(rule.conditions, features) },
      { label: "Contribution", numeric: true, cell: ({ rule }) => contributionCell(rule.contribution, largest) },
      { label: "Weight × value", numeric: true, cell: ({ rule }) => rule.members.length > 1 ? `${rule.members.length} leaves`
        : `${formatNumber(rule.weight, 4)} × ${formatNumber(rule.value, 4)}` },
      { label: "Support", numeric: true, cell: ({ rule }) => formatCount(rule.support) },
      { label: "From", cell: ({ rule }) => h("span", null, rule.members.map((member, i) => [i ? ", " : "",
        onTree ? h("button", { type: "button", class: "secondary link-like", onclick: () => onTree(member.tree) }, leafText(member))
          : leafText(member)])) },
    ],
  });
}

/** Each column's share of the summed |contribution| over the training rows (fire-rules v2 `importance`). */
export function columnImportance(importance) {
  const shares = Object.entries(importance ?? {}).sort((a, b) => b[1] - a[1]);
  if (!shares.length) return null;
  const largest = shares[0][1] || 1;
  return h("ul", { class: "importance", "aria-label": "Columns by importance" }, shares.map(([column, share]) => h("li", null,
    h("span", null, column),
    h("span", { class: "bar-track", "aria-hidden": "true" }, h("span", { class: "bar", style: `width:${(100 * share / largest).toFixed(1)}%` })),
    h("span", { class: "mono" }, `${formatNumber(100 * share, 3)}%`))));
}
