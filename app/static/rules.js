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

/** Whether the rows of `level` (null: a missing one) satisfy a condition on the one-hot indicator of `condition.level`:
 * the indicator is 1 for its level and 0 for the others and for a missing level (solver/rule_types.py
 * `accepted_levels`), so the condition's `missing` flag (about a NaN indicator, which never occurs) plays no part. */
function acceptsLevel(condition, level) {
  const indicator = level === condition.level ? 1 : 0;
  return condition.operator === ">" ? indicator > condition.threshold : indicator <= condition.threshold;
}

/** The conditions on the indicators of one text column in words, as the library words them (solver/rule_text.py
 * `RuleWording._levels`): the levels every condition accepts ("is C" accepts C alone, "is not C" every other level
 * and a missing value), said as one level, the set allowed or the set excluded, whichever is shorter. */
function levelText(conditions, column) {
  const allowed = column.categories.filter(level => conditions.every(condition => acceptsLevel(condition, level)));
  const excluded = column.categories.filter(level => !allowed.includes(level));
  const missingOk = conditions.every(condition => acceptsLevel(condition, null));
  const name = column.name;
  let text;
  if (!excluded.length) text = missingOk ? `${name} is any value` : `${name} is not missing`;
  else if (!allowed.length) text = missingOk ? `${name} is missing` : `${name} matches no value`;
  else if (allowed.length === 1) text = `${name} is ${allowed[0]}`;
  else if (allowed.length <= Math.max(2, excluded.length)) text = `${name} in {${allowed.join(", ")}}`;
  else if (excluded.length === 1) text = `${name} is not ${excluded[0]}`;
  else text = `${name} not in {${excluded.join(", ")}}`;
  return [text, (column.missing ?? true) && missingOk && allowed.length > 0 && excluded.length > 0];
}

/** Whether a value satisfies a numeric condition, compared as the model compares it (in float32). */
const satisfies = (value, bound) => (Math.fround(value) <= bound.threshold) === (bound.operator === "<=");

/** A value of a column as the table wrote it: 1, 0.5 (solver/rule_text.py `value_text`). */
const valueText = value => String(value);

/** One condition, or a feature's two bounds, in words: "0.11 < Height ≤ 0.16", or "smoker is 1" on a column that
 * held two values (its `values`) where each bound lies between them (solver/rule_text.py); and whether a missing
 * value satisfies it too (said only where the column can be missing). */
function conditionText(bounds, features) {
  const known = features.get(bounds[0].feature);
  const two = known?.column.values;
  if (two && bounds.every(bound => satisfies(two[0], { ...bound, operator: "<=" }) && !satisfies(two[1], { ...bound, operator: "<=" }))) {
    const kept = two.filter(value => bounds.every(bound => satisfies(value, bound)));
    const text = kept.length === 1 ? `${bounds[0].feature} is ${valueText(kept[0])}` : `${bounds[0].feature} matches no value`;
    return [text, (known.column.missing ?? true) && kept.length > 0 && bounds.every(bound => bound.missing)];
  }
  const lower = bounds.find(bound => bound.operator === ">");
  const upper = bounds.find(bound => bound.operator === "<=");
  const name = bounds[0].feature;
  const text = lower && upper ? `${threshold(lower)} < ${name} ≤ ${threshold(upper)}`
    : lower ? `${name} > ${threshold(lower)}` : `${name} ≤ ${threshold(upper)}`;
  return [text, (known?.column.missing ?? true) && bounds.every(bound => bound.missing)];
}

/** A rule's conditions in words, one [text, orMissing] per column: a text column's levels said once (`levelText`). */
function conditionTexts(conditions, features) {
  const byFeature = new Map();
  for (const condition of conditions) {
    const known = features.get(condition.feature);
    const level = known?.category !== undefined;
    const key = level ? `column:${known.column.name}` : condition.feature;
    const entry = byFeature.get(key) ?? { column: level ? known.column : null, bounds: [] };
    entry.bounds.push(level ? { ...condition, level: known.category } : condition);
    byFeature.set(key, entry);
  }
  return [...byFeature.values()].map(({ column, bounds }) => (column ? levelText(bounds, column) : conditionText(bounds, features)));
}

/** A rule's conditions in words, one column per line. */
function conditionList(conditions, features) {
  return h("ul", { class: "conditions" }, conditionTexts(conditions, features).map(([text, orMissing], i) =>
    h("li", null, i ? "and " : "if ", text, orMissing ? h("span", { class: "or-missing" }, " or missing") : null)));
}

/** A rule of `ensemble` in words as the rules table words it: its conditions, one column per line (`columns`: the
 * table's encoding, as for `rulesTable`). */
export const ruleConditions = (ensemble, rule, { columns = [] } = {}) => conditionList(rule.conditions, featureColumns(ensemble.columns ?? columns));

/** A rule of `ensemble` in words on one line: "Shell_weight > 0.24 and Sex is I" ("always" without conditions). */
export function ruleSentence(ensemble, rule, { columns = [] } = {}) {
  const texts = conditionTexts(rule.conditions, featureColumns(ensemble.columns ?? columns));
  return texts.map(([text, orMissing]) => (orMissing ? `${text} (or missing)` : text)).join(" and ") || "always";
}

/** Classes shown as columns of their own; a model with more shows the classes each rule moves most. */
const MAX_CLASS_COLUMNS = 8;
const TOP_CLASSES = 3;

/** Whether an amount (a contribution, an intercept) holds one number per class (a softmax ensemble's). */
export const perClass = amount => Array.isArray(amount);

/** The size of an amount: |x|, or the norm of its per-class numbers (the order the library sorts rules in). */
export const amountSize = amount => (perClass(amount) ? Math.hypot(...amount) : Math.abs(amount));

/** The labels of an ensemble's classes (`classes`, or "class k" where the document has none), or null. */
export function classLabels(ensemble) {
  if (!perClass(ensemble.intercept)) return null;
  return ensemble.classes ?? ensemble.intercept.map((_, k) => `class ${k}`);
}

/** An amount in words: "+0.4213", or per class the `top` classes it moves most: "A +7.4, B +4.8 (5 more)". */
export function amountText(amount, labels, { digits = 4, top = TOP_CLASSES } = {}) {
  if (!perClass(amount)) return formatSigned(amount, digits);
  const order = amount.map((value, k) => k).sort((a, b) => Math.abs(amount[b]) - Math.abs(amount[a]));
  const shown = order.slice(0, top).map(k => `${labels[k]} ${formatSigned(amount[k], 3)}`).join(", ");
  return order.length > top ? `${shown} (${order.length - top} more)` : shown;
}

/** What a log-link ensemble's scores are the log of, in words, read from its `response` as the library's rule text
 * reads it: "rate" (Poisson), "mean" (Tweedie, Gamma), "hazard ratio" (Cox); "rate" where it says nothing. */
export const logQuantity = ensemble => (ensemble.response?.startsWith("log ") ? ensemble.response.slice(4) : "rate");

/** What a rule's factor multiplies: the quantity itself, or for a hazard ratio (relative to the baseline hazard)
 * the hazard. */
export const factorTarget = ensemble => logQuantity(ensemble).replace(/ ratio$/, "");

/** A log-link rule's factor in words: "×1.8 hazard", "×1.3 mean", "×0.72 rate". */
export const factorText = (ensemble, contribution) => `×${formatNumber(Math.exp(contribution), 4)} ${factorTarget(ensemble)}`;

const capitalized = text => text.charAt(0).toUpperCase() + text.slice(1);

/** The intercept in words: a number; per class; a log-link model's base rate, mean or hazard ratio exp(intercept). */
export function interceptText(ensemble) {
  const labels = classLabels(ensemble);
  if (labels) return labels.map((label, k) => `${label} ${formatSigned(ensemble.intercept[k], 4)}`).join(" · ");
  if (ensemble.link === "log") {
    return `${formatSigned(ensemble.intercept, 5)} (base ${logQuantity(ensemble)} ${formatNumber(Math.exp(ensemble.intercept), 5)})`;
  }
  return formatSigned(ensemble.intercept, 5);
}

function contributionCell(contribution, largest) {
  const width = largest ? Math.max(2, Math.round(48 * Math.abs(contribution) / largest)) : 0;
  return h("span", { class: "contribution" },
    h("span", { class: `bar ${contribution >= 0 ? "up" : "down"}`, style: `width:${width}px`, "aria-hidden": "true" }),
    h("span", { class: "mono" }, formatSigned(contribution, 5)));
}

/** Amounts below this share of the largest are the solver's rounding (1e-14 and the like): shown as 0. */
const NEGLIGIBLE = 1e-9;

/** One class's amount of a rule: its number on a tint as strong as its share of the largest amount; `label`
 * names the class where the cell does not sit under its column. */
function classCell(value, largest, label = null) {
  const strength = largest ? Math.min(1, Math.abs(value) / largest) : 0;
  const zero = strength < NEGLIGIBLE;
  const tint = value >= 0 ? "23, 128, 61" : "180, 35, 24";
  return h("span", { class: `class-amount mono${zero ? " zero" : ""}`, title: zero ? String(value) : null,
                     style: zero ? null : `background: rgba(${tint}, ${(0.06 + 0.5 * strength).toFixed(3)})` },
    label === null ? null : h("span", { class: "class-label" }, `${label} `), zero ? "0" : formatSigned(value, 3));
}

const ORDERS = {
  contribution: (a, b) => amountSize(b.rule.contribution) - amountSize(a.rule.contribution),
  tree: (a, b) => (a.rule.tree - b.rule.tree) || (a.rule.leaf - b.rule.leaf),
};

/** The columns of what a rule adds: its contribution (and a log-link model's factor: "×1.8 hazard" under
 * "Hazard ×"), or one per class (the classes it moves most, for many classes). */
function amountColumns(ensemble) {
  const labels = classLabels(ensemble);
  const rules = ensemble.rules;
  if (!labels) {
    const largest = Math.max(0, ...rules.map(rule => Math.abs(rule.contribution)));
    if (ensemble.link !== "log") return [{ label: "Contribution", numeric: true, cell: ({ rule }) => contributionCell(rule.contribution, largest) }];
    return [
      { label: `Log ${logQuantity(ensemble)}`, numeric: true, cell: ({ rule }) => contributionCell(rule.contribution, largest) },
      { label: `${capitalized(factorTarget(ensemble))} ×`, numeric: true,
        cell: ({ rule }) => h("span", { class: "factor" }, factorText(ensemble, rule.contribution)) },
    ];
  }
  if (labels.length > MAX_CLASS_COLUMNS) {
    return [{ label: "Classes it moves most (log-odds)", cell: ({ rule }) => h("span", { class: "mono" }, amountText(rule.contribution, labels)) }];
  }
  const largest = Math.max(0, ...rules.flatMap(rule => rule.contribution.map(Math.abs)));
  // a column per class on a wide screen; on a narrow one (rows become cards) every class in one wrapped cell
  return [
    ...labels.map((label, k) => ({ label: String(label), numeric: true, className: "wide-only",
                                   cell: ({ rule }) => classCell(rule.contribution[k], largest) })),
    { label: "Per class (log-odds)", wide: true, className: "narrow-only", cell: ({ rule }) => h("span", { class: "class-amounts" },
      labels.map((label, k) => classCell(rule.contribution[k], largest, label))) },
  ];
}

/**
 * The rules of a `fire-rules` document as a table: id (as the API's explanations give it), conditions in
 * words, contribution (a log-link model's also as the factor it multiplies the rate, mean or hazard by; a K-class model's one
 * column per class, or the classes each rule moves most), weight and leaf value, support and the leaves it comes
 * from. `columns` (the table's encoding) puts one-hot conditions in words where the document does not carry
 * its own; `onTree(t)` makes each tree a button; `only` limits the table to these rule ids.
 */
export function rulesTable(ensemble, { columns = [], onTree = null, only = null, order = "contribution", caption, stability = null } = {}) {
  const features = featureColumns(ensemble.columns ?? columns);
  const rows = ensemble.rules.map((rule, position) => ({ rule, id: ruleId(rule, position), frequency: stability?.frequencies[position] }))
    .filter(row => only === null || only.includes(row.id))
    .sort(ORDERS[order]);
  // a leaf, or an internal node (rules from every node: fire-rules v3 members carry `node`, and `leaf` only for leaves)
  const leafText = member => (member.leaf !== undefined && member.leaf !== null ? `tree ${member.tree} leaf ${member.leaf}`
    : `tree ${member.tree} node ${member.node}`);
  const classes = classLabels(ensemble);
  return dataTable({
    caption,
    empty: ensemble.linear?.length ? "No rule: this step predicts with its linear terms (below) and the intercept."
      : "No rule: this step predicts the intercept alone.",
    rows,
    rowProps: ({ id }) => ({ "data-rule": id }),
    columns: [
      { label: "Rule", cell: ({ id }) => `#${id}` },
      { label: "Conditions", wide: true, cell: ({ rule }) => conditionList(rule.conditions, features) },
      ...amountColumns(ensemble),
      classes ? null : { label: "Weight × value", numeric: true, cell: ({ rule }) => rule.members.length > 1 ? `${rule.members.length} terms`
        : `${formatNumber(rule.weight, 4)} × ${formatNumber(rule.value, 4)}` },
      { label: "Support", numeric: true, cell: ({ rule }) => formatCount(rule.support) },
      stability ? frequencyColumn(stability) : null,
      { label: "From", cell: ({ rule }) => h("span", null, rule.members.map((member, i) => [i ? ", " : "",
        onTree ? h("button", { type: "button", class: "secondary link-like", onclick: () => onTree(member.tree) }, leafText(member))
          : leafText(member)])) },
    ].filter(Boolean),
  });
}

/**
 * How often a term was selected, as a share and a bar: over the half-sample fits (the step's `stability`), or over the
 * folds' paths at this step (a cross-validated step's `fold_stability`, which has `n_folds`).
 */
function frequencyColumn(stability) {
  const folds = stability.n_folds !== undefined;
  const count = folds ? stability.n_folds : stability.n_resamples;
  return { label: `Selected in (of ${count} ${folds ? "folds" : "half-sample fits"})`, numeric: true, cell: ({ frequency }) =>
    h("span", { class: "frequency", title: `selected by ${Math.round(frequency * count)} of ${count} ${folds ? "folds' paths at this step" : "fits"}` },
      h("span", { class: "bar-track", "aria-hidden": "true" }, h("span", { class: "bar", style: `width:${(100 * frequency).toFixed(0)}%` })),
      `${Math.round(100 * frequency)}%`) };
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

/** The most conditions of any rule of an ensemble (0 without rules): a rule from a node at depth d has d. */
export const longestRule = ensemble => Math.max(0, ...ensemble.rules.map(rule => rule.conditions.length));

/** A linear term's id as the text and the exports name it. */
export const linearId = term => `lin${term.id}`;

/**
 * The linear terms of a `fire-rules` document (v3 `linear`) as a table: id, the column, the coefficient per unit
 * (per class for K classes), the range the value is clipped to, the value a missing one is scored at and the
 * training rows that have a value. `amounts` (a scored row's, in the order of `linear`) adds what each adds there.
 */
export function linearTable(ensemble, { amounts = null, caption, stability = null } = {}) {
  const labels = classLabels(ensemble);
  const terms = ensemble.linear ?? [];
  const largest = amounts && !labels ? Math.max(0, ...amounts.map(Math.abs)) : 0;
  return dataTable({
    caption,
    empty: "No linear term.",
    rows: terms.map((term, position) => ({ term, amount: amounts?.[position],
                                           frequency: stability?.frequencies[ensemble.rules.length + position] })),
    rowProps: ({ term }) => ({ "data-linear": term.id }),
    columns: [
      { label: "Term", cell: ({ term }) => linearId(term) },
      { label: "Column", cell: ({ term }) => h("span", { class: "mono" }, term.feature) },
      { label: labels ? "Per unit, per class (log-odds)" : "Per unit", numeric: true,
        cell: ({ term }) => h("span", { class: "mono" }, amountText(term.coefficient, labels, { digits: 4 })) },
      { label: "Clipped to", cell: ({ term }) => h("span", { class: "mono" },
        `[${formatNumber(term.lower, 5)}, ${formatNumber(term.upper, 5)}]`) },
      { label: "Missing scored as", numeric: true, cell: ({ term }) => formatNumber(term.fill, 5) },
      amounts ? { label: "Adds for this row", numeric: true, cell: ({ amount }) => (labels
        ? h("span", { class: "mono" }, amountText(amount, labels)) : contributionCell(amount, largest)) }
        : { label: "Support", numeric: true, cell: ({ term }) => formatCount(term.support) },
      stability ? frequencyColumn(stability) : null,
    ].filter(Boolean),
  });
}
