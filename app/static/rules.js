// Rules in words: a rule's conditions as people read them and a table of a rule ensemble's rules.

import { dataTable, formatCount, formatNumber, formatSigned, h } from "./dom.js";

/** Encoded feature name → {column, category} for the one-hot indicators of a table's categorical columns. */
export function indicatorFeatures(columns = []) {
  return new Map(columns.filter(column => column.kind === "categorical")
    .flatMap(column => column.categories.map(category => [`${column.name}=${category}`, { column: column.name, category }])));
}

const threshold = value => formatNumber(value, 5);

/** One condition, or a feature's two bounds, in words: "Sex is not I", "0.11 < Height ≤ 0.16 or missing". */
function conditionText(bounds, indicators) {
  const indicator = indicators.get(bounds[0].feature);
  if (indicator && bounds.length === 1 && bounds[0].threshold >= 0 && bounds[0].threshold < 1) {
    return [`${indicator.column} is ${bounds[0].operator === ">" ? "" : "not "}${indicator.category}`, false];
  }
  const lower = bounds.find(bound => bound.operator === ">");
  const upper = bounds.find(bound => bound.operator === "<=");
  const name = bounds[0].feature;
  const text = lower && upper ? `${threshold(lower.threshold)} < ${name} ≤ ${threshold(upper.threshold)}`
    : lower ? `${name} > ${threshold(lower.threshold)}` : `${name} ≤ ${threshold(upper.threshold)}`;
  return [text, !indicator && bounds.every(bound => bound.missing)];
}

/** A rule's conditions in words, one feature per line. */
function conditionList(conditions, indicators) {
  const byFeature = new Map();
  for (const condition of conditions) byFeature.set(condition.feature, [...(byFeature.get(condition.feature) ?? []), condition]);
  return h("ul", { class: "conditions" }, [...byFeature.values()].map((bounds, i) => {
    const [text, orMissing] = conditionText(bounds, indicators);
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
 * The rules of a `fire-rules` document as a table: id (index into `rules`, as the API's explanations
 * give it), conditions in words, contribution, weight and leaf value, support and the leaves it comes from.
 * `onTree(t)` makes each tree a button; `only` limits the table to these rule ids.
 */
export function rulesTable(ensemble, { indicators = new Map(), onTree = null, only = null, order = "contribution", caption } = {}) {
  const largest = Math.max(0, ...ensemble.rules.map(rule => Math.abs(rule.contribution)));
  const rows = ensemble.rules.map((rule, id) => ({ rule, id }))
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
      { label: "Conditions", wide: true, cell: ({ rule }) => conditionList(rule.conditions, indicators) },
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
