// One step of a finished path: its facts, its rules in words, the trees they come from, and its promotion
// to a model.

import { get, post } from "./api.js";
import { metricLabel, metricPairs } from "./chart.js";
import { definitions, fieldLabel, fill, formatCount, formatDuration, formatNumber, h, link } from "./dom.js";
import { field, onSubmit } from "./forms.js";
import { amountSize, classLabels, columnImportance, interceptText, linearTable, rulesTable } from "./rules.js";
import { selectedLeaves, treeFigures } from "./trees.js";

const TREES_AT_FIRST = 12;
const TREES_PER_REQUEST = 100; // the most GET /v1/forests/{id}/trees answers at once

/** Every fact of a step record (or a model's metrics) that it carries, metrics included whatever the loss
 * (named as `loss` measures them): [term, text, field]. */
export function stepFactPairs(step, loss = null) {
  // the terms the rule budget counts: rules and linear terms (one count where a record stored before they were
  // told apart does not say which are which)
  const split = Number.isFinite(step.n_rules) && Number.isFinite(step.n_linear);
  const counts = !split ? [["terms (rules + linear terms)", formatCount(step.n_terms), "n_terms"]]
    : step.n_linear ? [["terms", formatCount(step.n_terms), "n_terms"], ["rules", formatCount(step.n_rules), "n_rules"],
                       ["linear terms", formatCount(step.n_linear), "n_linear"]]
    : [["rules", formatCount(step.n_rules), "n_rules"]];
  const pairs = [...counts,
                 ["trees", formatCount(step.n_trees), "n_trees"],
                 ["antecedents", formatCount(step.n_antecedents), "n_antecedents"],
                 ["longest rule", `${formatCount(step.longest_rule)} ${step.longest_rule === 1 ? "condition" : "conditions"}`,
                  "longest_rule"],
                 ["λs", formatNumber(step.lambda_s, 5), "lambda_s"], ["λf", formatNumber(step.lambda_f, 5), "lambda_f"]];
  for (const pair of metricPairs([step])) {
    if (pair.train) pairs.push([`train ${metricLabel(pair.name, loss)}`, formatNumber(step[pair.train], 6), pair.train]);
    if (pair.val) pairs.push([`validation ${metricLabel(pair.name, loss)}`, formatNumber(step[pair.val], 6), pair.val]);
  }
  pairs.push(["objective", formatNumber(step.objective, 6), "objective"], ["solver passes", formatCount(step.n_iter), "n_iter"],
             ["converged", step.converged ? "yes" : "no", "converged"], ["time", formatDuration(step.seconds), "seconds"]);
  const shown = new Set([...pairs.map(pair => pair[2]), "index", "step", "n_rules", "n_linear", "n_terms"]);
  const others = Object.entries(step).filter(([key, value]) => !shown.has(key) && typeof value === "number")
    .map(([key, value]) => [fieldLabel(key), formatNumber(value, 6), key]);
  return [...pairs.filter(([, , key]) => key in step), ...others];
}

/** Where a step's rules say fewer rules than it selected: rules of the same conditions (from several trees) are
 * said once, their contributions added. */
function mergedNote(rules) {
  const said = rules.rules.rules.length;
  if (!Number.isFinite(rules.n_rules) || rules.n_rules === said) return null;
  return h("p", { class: "muted", id: "merged-rules" }, `The step selected ${formatCount(rules.n_rules)} rules; those with `
    + `the same conditions are said once here, their contributions added: ${formatCount(said)} rules.`);
}

/** A model name the API accepts, from the dataset's file name and target: "abalone-rings". */
function suggestedName(dataset) {
  const stem = (dataset?.source.filename ?? "").split(/[\\/]/).pop().replace(/\..*$/, "");
  return [stem, dataset?.target].filter(Boolean).join("-").replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(0, 64)
    || "model";
}

function promoteForm(jobId, step, dataset, navigate) {
  const name = h("input", { name: "name", required: true, value: suggestedName(dataset), autocomplete: "off" });
  const description = h("textarea", { name: "description", rows: 2 });
  const slot = h("div");
  const form = h("form", { "aria-label": `Promote step ${step}` },
    h("div", { class: "fields" },
      field("Model name", name, { name: "name", help: "letters, digits, '_', '.', '-'; versions count per name" }),
      field("Description (optional)", description, { name: "description" })),
    h("button", { type: "submit" }, `Promote step ${step} to a model`), slot);
  onSubmit(form, slot, async () => {
    const model = await post("/v1/models", { job_id: jobId, step, name: name.value.trim(),
                                             description: description.value.trim() || null });
    navigate(`/dashboard/models/${model.id}`);
  });
  return form;
}

async function fetchTrees(forestId, indices, signal) {
  const answers = [];
  for (let start = 0; start < indices.length; start += TREES_PER_REQUEST) {
    const query = indices.slice(start, start + TREES_PER_REQUEST).map(t => `tree=${t}`).join("&");
    answers.push(await get(`/v1/forests/${forestId}/trees?${query}`, signal));
  }
  return answers;
}

/** The trees of the rules, those with the largest contributions first; the rest on request. */
function treesSection(forestId, ensemble, signal) {
  const leaves = selectedLeaves(ensemble);
  const weight = t => leaves.get(t).reduce((sum, member) => sum + amountSize(member.choice.contribution), 0);
  const order = [...leaves.keys()].sort((a, b) => weight(b) - weight(a));
  const slot = h("div");
  let drawn = 0;
  const draw = count => fill(slot, async () => {
    const answers = await fetchTrees(forestId, order.slice(0, count), signal);
    drawn = count;
    const more = count < order.length ? h("button", { type: "button", class: "secondary", onclick: () => draw(order.length) },
                                            `Draw all ${order.length} trees`) : null;
    return [h("div", { class: "trees" }, answers.flatMap(answer => treeFigures(answer, leaves))), more];
  });
  const focusTree = async t => {
    if (order.indexOf(t) >= drawn) await draw(order.length);
    const figure = document.getElementById(`tree-${t}`);
    figure?.scrollIntoView({ block: "center" });
    figure?.focus();
  };
  if (order.length) draw(Math.min(TREES_AT_FIRST, order.length));
  else slot.append(h("p", { class: "muted" }, "No tree: this step has no rule."));
  return { element: slot, focusTree };
}

/**
 * The panel of one step of `result` (a path or grid result). `show(k)` loads step k's rules and trees;
 * `dataset` (its columns) puts one-hot conditions in words.
 */
export function stepPanel({ jobId, result, dataset, loss, signal, navigate }) {
  const element = h("section", { class: "card", id: "step", "aria-live": "polite" });
  let current = null;
  const stepLink = (k, text) => (k >= 0 && k < result.steps.length ? link(`/dashboard/jobs/${jobId}/steps/${k}`, text) : null);

  function show(k) {
    current?.abort();
    current = new AbortController();
    const stepSignal = AbortSignal.any([signal, current.signal]);
    fill(element, async () => {
      const rules = await get(`/v1/jobs/${jobId}/steps/${k}/rules`, stepSignal);
      const trees = treesSection(result.forest_id, rules.rules, stepSignal);
      const order = h("select", { id: "rule-order" }, h("option", { value: "contribution" }, "largest contribution first"),
                      h("option", { value: "tree" }, "tree and leaf"));
      const table = h("div");
      // the half-sample fits' frequencies where the job measured them, else a cross-validated step's over its folds
      const stability = rules.stability ?? rules.fold_stability ?? null;
      const drawTable = () => table.replaceChildren(rulesTable(rules.rules, { columns: dataset?.columns, order: order.value,
                                                                            onTree: trees.focusTree, stability }));
      const importance = columnImportance(rules.rules.importance);
      order.addEventListener("change", drawTable);
      drawTable();
      return [
        h("div", { class: "heading-row" }, h("h2", { id: "step-title" }, `Step ${k}`,
          rules.selected ? h("span", { class: "tag selected" }, " selected") : null),
          h("nav", { class: "toolbar", "aria-label": "Steps" }, stepLink(k - 1, "← previous step"),
            rules.selected ? null : stepLink(result.selected, "selected step"), stepLink(k + 1, "next step →"))),
        h("div", { id: "step-facts" }, definitions(stepFactPairs(rules, loss))),
        h("details", null, h("summary", null, "Promote this step to a model"), promoteForm(jobId, k, dataset, navigate)),
        h("h3", { id: "rules-title" }, `Rules (${rules.rules.rules.length})`),
        mergedNote(rules),
        h("p", { id: "intercept" }, classLabels(rules.rules) ? "Intercept per class (log-odds): " : "Intercept: ",
          h("span", { class: "mono" }, interceptText(rules.rules))),
        rules.stability ? h("p", { id: "rule-stability", class: "muted" }, `Rule stability: the rule sets of two disjoint halves `
          + `of the rows share a Dice index of ${formatNumber(rules.stability.dice, 3)} (1: the same rules, 0: none in common); `
          + "beside each term, the share of the half-sample fits that selected it (the same conditions up to the decile "
          + "cuts of each column).") : null,
        !rules.stability && rules.fold_stability ? h("p", { id: "rule-fold-stability", class: "muted" }, "Rule stability over "
          + `the ${rules.fold_stability.n_folds} folds: their paths at this step share a Dice index of `
          + `${formatNumber(rules.fold_stability.dice, 3)} (1: the same rules in every fold, 0: no two folds share one); beside `
          + "each term, the share of the folds whose path selected it at this step (the same conditions up to the decile cuts "
          + "of each column).") : null,
        h("div", { class: "toolbar" }, h("label", { for: "rule-order" }, "Order "), order),
        table,
        rules.rules.linear?.length ? [h("h3", { id: "linear-title" }, `Linear terms (${rules.rules.linear.length})`),
          h("p", { class: "muted" }, "Each adds its amount per unit times the column's value clipped to its range (a missing "
            + "value counts as the training mean)."),
          h("div", { id: "linear-terms" }, linearTable(rules.rules, { stability }))] : null,
        importance ? [h("h3", null, "Columns by importance"), importance] : null,
        h("h3", null, `Trees: ${formatCount(rules.n_trees)} trees, ${formatCount(rules.rules.n_antecedents)} antecedents`),
        h("p", { class: "muted" }, classLabels(rules.rules) ? "Selected leaves are marked with their rule (#rule below) and the class "
          + "they move most; the splits " : "Selected leaves are coloured by the sign of their contribution (#rule below; a rule from an "
          + "inner node outlines that node, #rule beside it: its conditions are the splits above it); the splits ",
          "they need are highlighted, darker where several selected leaves share them."),
        trees.element,
      ];
    });
  }
  return { element, show };
}
