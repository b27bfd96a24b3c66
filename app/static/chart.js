// Charts of a regularization path in hand-written SVG, drawn at the width of their container (so text
// keeps its size on a narrow screen) and drawn again when that width changes.

import { card, fieldLabel, formatCount, formatNumber, h, svg } from "./dom.js";

const MARGIN = { left: 60, right: 16, top: 14, bottom: 44 };
const PATH_TOP = 30; // a path chart's top margin: room for its count of terms along the top
const CELL_COLORS = ["#1f56b3", "#c2410c", "#17803d", "#7c3aed", "#b42318", "#0e7490", "#a16207", "#be185d"];

/** The order metrics are offered in: the loss, then regression's, then classifiers'; others after them. */
const METRIC_ORDER = ["loss", "r2", "rmse", "mae", "auc", "accuracy", "brier", "cindex"];

/** The metrics the step records carry, as train/validation pairs in METRIC_ORDER: [{name: "loss", train:
 * "train_loss", val: "val_loss"}, …], whatever the loss (a regression path's `val_r2` gives an "r2" pair). */
export function metricPairs(steps) {
  const pairs = new Map();
  for (const key of Object.keys(steps[0] ?? {})) {
    const found = /^(train|val)_(.+)$/.exec(key);
    if (!found || !steps.some(step => Number.isFinite(step[key]))) continue;
    const pair = pairs.get(found[2]) ?? { name: found[2] };
    pair[found[1]] = key;
    pairs.set(found[2], pair);
  }
  const rank = pair => (METRIC_ORDER.includes(pair.name) ? METRIC_ORDER.indexOf(pair.name) : METRIC_ORDER.length);
  return [...pairs.values()].sort((a, b) => rank(a) - rank(b));
}

const METRIC_NAMES = { auc: "AUC", mae: "MAE", r2: "R²", rmse: "RMSE", brier: "Brier score", cindex: "C-index" };

/** A metric's name in words. `loss` is the loss document a job or model carries (its `loss_info`: the API's
 * LossView, from the library's loss registry), whose metrics are labelled there: "MSE", "log loss" and "deviance"
 * for the loss itself, "R²", "AUC", … for the others; without one, a generic label. */
export const metricLabel = (name, loss) => (name.endsWith("_se")  // a cross-validated figure's standard error
  ? `${metricLabel(name.slice(0, -3), loss)} standard error`
  : loss?.metrics?.find(metric => metric.name === name)?.label ?? METRIC_NAMES[name] ?? fieldLabel(name));

/** The first `count` readable validation metrics of a record (a step, a job's summary or progress, a model's
 * metrics) in words, in the order the loss lists them (most telling first): "R² 0.5234, RMSE 2.141" (regression),
 * "AUC 0.8123, accuracy 0.52" (classifiers), "deviance 1.02, MAE 0.87" (counts), after "validation " where
 * `named`; "train MSE 4.1" where it has no validation metric (no validation rows). A record from before R² was
 * recorded shows its loss. */
export function metricsText(record, loss, { count = Infinity, named = false } = {}) {
  const names = loss?.metrics?.map(metric => metric.name) ?? ["loss"];
  for (const side of ["val", "train"]) {
    const shown = names.filter(name => Number.isFinite(record?.[`${side}_${name}`])).slice(0, count);
    if (!shown.length) continue;
    const text = shown.map(name => `${metricLabel(name, loss)} ${formatNumber(record[`${side}_${name}`], 4)}`).join(", ");
    return side === "train" ? `train ${text}` : named ? `validation ${text}` : text;
  }
  return "—";
}

/** The metric a path's chart opens on, the loss's `chart_metric`: R² for regression, which for a fixed set of rows
 * is 1 − MSE / variance, so its curve has the loss's shape (upside down: the selected step is its peak) on a scale
 * that reads without the target's units (an MSE of 1.3e9 says little); a classifier's or a count path's loss, the
 * quantity it selects on (AUC and the Brier score can order the steps differently). */
const defaultMetric = (pairs, loss) =>
  (pairs.some(pair => pair.name === loss?.chart_metric) ? loss.chart_metric : pairs[0]?.name);

/** A record's count of selected terms (a step, a job's summary or progress, a model's metrics), in words: "7 terms:
 * 5 rules, 2 linear terms"; "5 rules" without linear terms; "7 terms" where the split is unknown (a record stored
 * before it was kept). The rule budget counts terms. */
export function termsText(record) {
  const counted = (count, noun) => `${formatCount(count)} ${noun}${count === 1 ? "" : "s"}`;
  if (!Number.isFinite(record?.n_terms)) return "—";
  if (!Number.isFinite(record.n_rules) || !Number.isFinite(record.n_linear)) return counted(record.n_terms, "term");
  if (!record.n_linear) return counted(record.n_rules, "rule");
  return `${counted(record.n_terms, "term")}: ${counted(record.n_rules, "rule")}, ${counted(record.n_linear, "linear term")}`;
}

/** What a step is, one fact a line: λ, terms, trees, antecedents and every metric the record carries. */
function stepFacts(step, loss) {
  const facts = [`λs ${formatNumber(step.lambda_s)}` + (step.lambda_f ? ` · λf ${formatNumber(step.lambda_f)}` : ""),
                 termsText(step) + (step.n_trees !== undefined ? ` · ${formatCount(step.n_trees)} trees` : "")
                 + (Number.isFinite(step.n_antecedents) ? ` · ${formatCount(step.n_antecedents)} antecedents` : "")];
  for (const pair of metricPairs([step])) {
    for (const [side, key] of [["train", pair.train], ["validation", pair.val]]) {
      if (key && Number.isFinite(step[key])) facts.push(`${side} ${metricLabel(pair.name, loss)} ${formatNumber(step[key], 5)}`);
    }
  }
  return facts;
}

function niceTicks(low, high, count) {
  const span = high - low || 1;
  const power = 10 ** Math.floor(Math.log10(span / count));
  const step = [1, 2, 2.5, 5, 10].map(multiple => multiple * power).find(size => span / size <= count);
  const ticks = [];
  for (let tick = Math.ceil(low / step) * step; tick <= high + step * 1e-9; tick += step) ticks.push(Number(tick.toPrecision(12)));
  return ticks;
}

const linear = ([d0, d1], [r0, r1]) => value => r0 + (value - d0) * ((r1 - r0) / (d1 - d0 || 1));

export function extent(values, { zero = false } = {}) {
  const finite = values.filter(Number.isFinite);
  let low = Math.min(...finite, ...(zero ? [0] : [])), high = Math.max(...finite);
  if (!finite.length) return [0, 1];
  if (low === high) { low -= Math.abs(low) * 0.1 || 1; high += Math.abs(high) * 0.1 || 1; }
  const pad = zero ? 0 : (high - low) * 0.06;
  return [low - pad, high + (high - low) * 0.04 + (zero ? 0 : pad)];
}

/** Scales, axes and grid of a plot `width` × `height` px over the two domains; x ticks at whole numbers (steps,
 * terms) unless `wholeX` is false, or those `ticks(low, high, count)` gives, labelled by `xFormat`; `top`: the
 * margin above the plot. */
export function plotFrame(width, height, xDomain, yDomain, xTitle, yTitle, { wholeX = true, ticks = null, xFormat = null, top = MARGIN.top } = {}) {
  const x = linear(xDomain, [MARGIN.left, width - MARGIN.right]);
  const y = linear(yDomain, [height - MARGIN.bottom, top]);
  const xCount = Math.max(2, Math.floor(width / 90));
  const xTicks = ticks ? ticks(...xDomain, xCount)
    : niceTicks(...xDomain, xCount).filter(tick => !wholeX || Number.isInteger(tick));
  const yTicks = niceTicks(...yDomain, Math.max(2, Math.floor(height / 55)));
  const bottom = height - MARGIN.bottom;
  const group = svg("g", null,
    svg("g", { class: "grid" }, yTicks.map(tick => svg("line", { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(tick), y2: y(tick) }))),
    svg("g", { class: "axis" },
      svg("line", { x1: MARGIN.left, x2: width - MARGIN.right, y1: bottom, y2: bottom }),
      svg("line", { x1: MARGIN.left, x2: MARGIN.left, y1: top, y2: bottom }),
      xTicks.map(tick => svg("text", { x: x(tick), y: bottom + 16, "text-anchor": "middle" },
                             xFormat ? xFormat(tick) : wholeX ? formatCount(tick) : formatNumber(tick, 4))),
      yTicks.map(tick => svg("text", { x: MARGIN.left - 6, y: y(tick) + 4, "text-anchor": "end" }, formatNumber(tick, 3))),
      svg("text", { x: (MARGIN.left + width - MARGIN.right) / 2, y: height - 6, "text-anchor": "middle" }, xTitle),
      svg("text", { transform: `translate(13 ${(top + bottom) / 2}) rotate(-90)`, "text-anchor": "middle" }, yTitle)),
    svg("rect", { class: "plot-frame", x: MARGIN.left, y: top, width: width - MARGIN.left - MARGIN.right,
                  height: bottom - top, fill: "none", stroke: "none" }));
  return { x, y, group, top, bottom };
}

function polyline(points, className, style) {
  const defined = points.filter(([px, py]) => Number.isFinite(px) && Number.isFinite(py));
  return svg("polyline", { class: className, style, points: defined.map(point => point.join(",")).join(" ") });
}

export function plotSize(container) {
  const width = Math.max(260, Math.floor(container.clientWidth || container.parentElement?.clientWidth || 600));
  return { width, height: Math.round(Math.min(340, Math.max(220, width * 0.48))) };
}

/** Call `draw()` now and whenever the width of `container` changes. */
export function drawAtWidth(container, draw) {
  let width = null;
  new ResizeObserver(() => {
    if (container.clientWidth && container.clientWidth !== width) { width = container.clientWidth; draw(); }
  }).observe(container);
  draw();
}

export function selectControl(id, label, options, value, onChange) {
  const select = h("select", { id, onchange: event => onChange(event.target.value) },
                   options.map(([optionValue, text]) => h("option", { value: optionValue, selected: optionValue === value }, text)));
  return h("span", { class: "field-inline" }, h("label", { for: id }, `${label} `), select);
}

/** A chart's legend: [text, color, dashed, shape] each, a line swatch (dashed where asked), or a `shape`: "dot" or
 * "ring" for a chart of points. */
export function legend(entries) {
  return h("ul", { class: "legend" }, entries.map(([text, color, dashed, shape]) =>
    h("li", null, h("span", { class: `swatch${dashed ? " dashed" : ""}${shape ? ` ${shape}` : ""}`, style: `border-color:${color}${shape === "dot" ? `;background:${color}` : ""}` }), text)));
}

let chartCount = 0;

/** Width in px of a chart label (11 px type) of `text`: enough to keep labels from overlapping. */
export const labelWidth = text => 6.5 * String(text).length + 4;

/** Of `labels` ([{x, text, weight}]), those kept in order of weight (heaviest first) where each clears every one
 * kept before it and ends inside `width`; left to right. */
function spaced(labels, width) {
  const kept = [];
  const span = label => [label.x - labelWidth(label.text) / 2 - 3, label.x + labelWidth(label.text) / 2 + 3];
  for (const label of [...labels].sort((a, b) => b.weight - a.weight)) {
    const [start, end] = span(label);
    if (end - 3 > width || kept.some(other => start < span(other)[1] && span(other)[0] < end)) continue;
    kept.push(label);
  }
  return kept.sort((a, b) => a.x - b.x);
}

/** A count of a step along the top of its chart (`field`: n_terms or n_antecedents) at each step where it changes,
 * glmnet's count of nonzero coefficients above its lambda axis. Where two would overlap, the count that holds for
 * more steps is kept (a count held for one step gives way to the next). */
function topAxis(points, field, x, top, width) {
  const changes = [];
  points.forEach((step, k) => {
    if (!Number.isFinite(step[field])) return;
    if (k === 0 || step[field] !== points[k - 1][field]) changes.push({ x: x(step.index), text: formatCount(step[field]), weight: 0 });
    if (changes.length) changes.at(-1).weight += 1; // the steps this count holds for
  });
  const labels = spaced(changes, width);
  return svg("g", { class: "axis top-axis" },
    svg("line", { x1: x(points[0]?.index ?? 0), x2: x(points.at(-1)?.index ?? 0), y1: top, y2: top }),
    svg("text", { x: MARGIN.left - 6, y: top - 6, "text-anchor": "end" }, field === "n_terms" ? "terms" : "antecedents"),
    labels.map(label => svg("g", { "data-count": label.text },
      svg("line", { x1: label.x, x2: label.x, y1: top - 3, y2: top }),
      svg("text", { x: label.x, y: top - 6, "text-anchor": "middle" }, label.text))));
}

/** The steps a cross-validated path chose from (`cv`: the result's) and the line that chose: the lowest mean
 * validation loss within the budget, its standard error, the threshold one standard error above it, and the first
 * step under it (the one standard error rule's). */
export function crossValidationChoice(steps, cv) {
  const lowest = steps[cv.best_min], rule = steps[cv.best_1se];
  if (!lowest || !rule || !Number.isFinite(lowest.val_loss) || !Number.isFinite(lowest.val_loss_se)) return null;
  return { lowest, rule, threshold: lowest.val_loss + lowest.val_loss_se };
}

const SELECTIONS = { "1se": "the one standard error rule", loss: "the lowest mean loss", auc: "the highest mean AUC",
                     cindex: "the highest mean C-index" };

/**
 * The sentence that says how a cross-validated path chose its step (`result`: its steps, selected step, cv and
 * parameters), its numbers those the chart draws: "Lowest mean validation MSE 3134 ± 177 at step 14 (12 terms:
 * 10 rules, 2 linear terms); one standard error above it is 3311; the sparsest step under that line is step 7 (5
 * terms: …), chosen by the one standard error rule."
 */
export function crossValidationSentence(result, loss) {
  const choice = result.cv ? crossValidationChoice(result.steps, result.cv) : null;
  if (!choice) return null;
  const { lowest, rule, threshold } = choice;
  const budget = result.parameters.path.max_rules;
  const within = result.steps.filter(step => budget === null || budget === undefined || step.n_terms <= budget);
  const under = within.filter(step => step.val_loss <= threshold);
  // the rule takes the first step under the line; along a path that is nearly always the one with the fewest terms
  const sparsest = under.every(step => step.n_terms >= rule.n_terms);
  const chosen = result.steps[result.selected];
  const selection = SELECTIONS[result.cv.selection] ?? result.cv.selection;
  const chosenText = chosen === rule ? `, chosen by ${selection}.`
    : `. Chosen by ${selection}: step ${chosen.index} (${termsText(chosen)}).`;
  return `${budget !== null && budget !== undefined ? `Within the rule budget of ${formatCount(budget)} terms, the lowest`
    : "Lowest"} mean validation ${metricLabel("loss", loss)} is ${formatNumber(lowest.val_loss)} ± `
    + `${formatNumber(lowest.val_loss_se)} (one standard error over ${result.cv.folds} folds) at step ${lowest.index} `
    + `(${termsText(lowest)}); one standard error above it is ${formatNumber(threshold)}; the `
    + `${sparsest ? "sparsest" : "first"} step under that line is step ${rule.index} (${termsText(rule)})${chosenText}`;
}

/**
 * Train and validation metric of each step of a path, drawn by step along the path (λ from largest to smallest)
 * with each step's count of terms along the top (or its antecedents): glmnet's plot of a path. Steps that hold as
 * many terms stand side by side, not on one x. The selected step and the rule budget are drawn, the facts of a
 * step in a tooltip. With `onShow`, a click on a step or the arrow keys (the plot is a slider over the steps) call
 * `onShow(index)`. A cross-validated path (`cv`, the result's: {folds, best_min, best_1se}) opens on its loss,
 * drawn with ± one standard error of the folds' mean at each step, the threshold one standard error above the
 * lowest mean, and both choices: the lowest mean and the first step under the threshold, the chosen one solid.
 * Returns {element, show(index), setSteps(steps)}.
 */
export function pathChart({ steps, selected = null, budget = null, shown = null, onShow = null, label = "Path", loss = null, cv = null }) {
  const id = `chart-${chartCount += 1}`;
  const state = { steps, shown, metric: null, top: "n_terms" }; // metric: a pair's name, the default until chosen
  const plot = h("div", { class: "chart" });
  const tooltip = h("div", { class: "tooltip", hidden: true });
  const controls = h("div", { class: "toolbar" });
  const legendSlot = h("div");
  const element = h("div", null, controls, plot, legendSlot);

  const metrics = () => metricPairs(state.steps);
  const currentPair = () => {
    const pairs = metrics();
    const name = pairs.some(pair => pair.name === state.metric) ? state.metric : cv ? "loss" : defaultMetric(pairs, loss);
    return pairs.find(pair => pair.name === name) ?? {};
  };
  const topName = () => (state.top === "n_terms" ? "terms" : "antecedents");

  function drawControls() {
    const choices = [];
    if (metrics().length > 1) {
      choices.push(selectControl(`${id}-metric`, "Metric", metrics().map(pair => [pair.name, metricLabel(pair.name, loss)]),
                                 currentPair().name, value => { state.metric = value; draw(); }));
    }
    if (state.steps.some(step => Number.isFinite(step.n_antecedents))) {
      choices.push(selectControl(`${id}-top`, "Along the top", [["n_terms", "terms (rules + linear terms)"], ["n_antecedents", "antecedents"]],
                                 state.top, value => { state.top = value; draw(); }));
    }
    controls.replaceChildren(...choices);
  }

  function nearestStep(px, py, scales) {
    const pair = currentPair();
    let best = null, bestDistance = Infinity;
    state.steps.forEach((step, index) => {
      for (const key of [pair.train, pair.val]) {
        if (!key || !Number.isFinite(step[key])) continue;
        const distance = Math.hypot(scales.x(step.index) - px, scales.y(step[key]) - py);
        if (distance < bestDistance) { best = index; bestDistance = distance; }
      }
    });
    return best;
  }

  function showTooltip(index, scales, width) {
    const step = state.steps[index];
    if (!step) { tooltip.hidden = true; return; }
    tooltip.replaceChildren(h("strong", null, `Step ${step.index}`, index === selected ? " (selected)" : ""),
                            ...stepFacts(step, loss).map(fact => h("div", null, fact)));
    tooltip.hidden = false;
    const left = scales.x(step.index) + 12;
    tooltip.style.left = `${Math.max(0, Math.min(left, width - tooltip.offsetWidth - 4))}px`;
    tooltip.style.top = `${scales.top}px`;
  }

  function draw() {
    tooltip.hidden = true; // placed for the previous drawing
    drawControls();
    const pair = currentPair();
    const { width, height } = plotSize(plot);
    const points = state.steps;
    // the folds' standard error, of the loss only (the other metrics are means without one)
    const onLoss = pair.name === "loss";
    const withError = onLoss ? points.filter(step => Number.isFinite(step.val_loss_se) && Number.isFinite(step.val_loss)) : [];
    const choice = cv && onLoss ? crossValidationChoice(points, cv) : null;
    const ys = [...points.flatMap(step => [step[pair.train], step[pair.val]]),
                ...withError.flatMap(step => [step.val_loss - step.val_loss_se, step.val_loss + step.val_loss_se])];
    const first = points[0]?.index ?? 0, last = points.at(-1)?.index ?? 0;
    const stepTicks = (low, high, count) => niceTicks(low, high, count) // the steps' own numbers (-0 as 0)
      .filter(tick => Number.isInteger(tick) && tick >= first && tick <= last).map(tick => tick + 0);
    const scales = plotFrame(width, height, [first - 0.5, last + 0.5], extent(ys), "step (λ from largest to smallest)",
                             metricLabel(pair.name ?? "loss", loss), { top: PATH_TOP, ticks: stepTicks });
    const { x, y } = scales;
    const right = width - MARGIN.right;
    // vertical lines at steps, each label on a row of its own inside the plot: right of its line where it fits,
    // else left of it, else as far right as it fits
    let row = 0;
    const labelStart = (at, text) => {
      const size = labelWidth(text);
      if (at + 4 + size <= right) return at + 4;
      return at - 4 - size >= MARGIN.left + 2 ? at - 4 - size : Math.max(MARGIN.left + 2, right - size);
    };
    const marker = (index, className, text) => {
      const step = state.steps[index];
      if (!step) return null;
      const at = x(step.index);
      const drawn = svg("g", { class: "marker", "data-step": step.index },
        svg("line", { class: className, x1: at, x2: at, y1: scales.top, y2: scales.bottom }),
        text ? svg("text", { class: "label on-plot", x: labelStart(at, text), y: scales.top + 12 + 13 * row }, text) : null);
      if (text) row += 1;
      return drawn;
    };
    const errorBar = step => {
      const px = x(step.index), low = y(step.val_loss - step.val_loss_se), high = y(step.val_loss + step.val_loss_se);
      return svg("g", null, svg("line", { x1: px, x2: px, y1: low, y2: high }),
                 svg("line", { x1: px - 3, x2: px + 3, y1: low, y2: low }), svg("line", { x1: px - 3, x2: px + 3, y1: high, y2: high }));
    };
    // the budget bounds terms: a line after the last step within it, where the path went past it
    const past = budget !== null ? points.findIndex(step => step.n_terms > budget) : -1;
    const budgetAt = past > 0 ? (x(points[past - 1].index) + x(points[past].index)) / 2 : null;
    const markers = [];
    if (cv) {
      const chosenMark = index => (index === selected ? " (chosen)" : "");
      if (cv.best_min === cv.best_1se) {
        markers.push(marker(cv.best_min, `cv-min-step cv-1se-step${cv.best_min === selected ? " chosen" : ""}`,
                            `lowest mean and 1 SE rule: step ${cv.best_min}${chosenMark(cv.best_min)}`));
      } else {
        markers.push(marker(cv.best_1se, `cv-1se-step${cv.best_1se === selected ? " chosen" : ""}`, `1 SE rule: step ${cv.best_1se}${chosenMark(cv.best_1se)}`),
                     marker(cv.best_min, `cv-min-step${cv.best_min === selected ? " chosen" : ""}`, `lowest mean: step ${cv.best_min}${chosenMark(cv.best_min)}`));
      }
      if (selected !== null && selected !== cv.best_min && selected !== cv.best_1se) markers.push(marker(selected, "selected-step", `selected: step ${selected}`));
    } else if (selected !== null) {
      markers.push(marker(selected, "selected-step", `selected: step ${selected}`));
    }
    const focus = state.shown ?? selected;
    if (state.shown !== null && state.shown !== selected && !(cv && [cv.best_min, cv.best_1se].includes(state.shown))) {
      markers.push(marker(state.shown, "focused-step", null));
    }
    // the threshold's label above its line, or below it where the markers' labels are
    const thresholdY = choice ? y(choice.threshold) : null;
    const labelRows = scales.top + 13 * row + 4;
    const thresholdLabelY = thresholdY === null ? null : thresholdY - 16 > labelRows ? thresholdY - 5
      : Math.max(thresholdY, labelRows) + 14;
    const series = [[pair.train, "train"], [pair.val, "validation"]].filter(([key]) => key);
    const chart = svg("svg", {
      width, height, viewBox: `0 0 ${width} ${height}`, "aria-labelledby": `${id}-title`,
      ...(onShow ? { tabindex: 0, role: "slider", "aria-valuemin": 0, "aria-valuemax": state.steps.length - 1,
                     "aria-valuenow": focus ?? 0, "aria-valuetext": stepValueText(state.steps[focus ?? 0], loss) } : { role: "img" }),
    },
      svg("title", { id: `${id}-title` }, `${label}: ${metricLabel(pair.name ?? "loss", loss)} by step, ${topName()} along the top`
          + (onShow ? "; arrow keys choose a step" : "")),
      scales.group,
      topAxis(points, state.top, x, scales.top, width),
      budgetAt !== null ? svg("line", { class: "budget", x1: budgetAt, x2: budgetAt, y1: scales.top, y2: scales.bottom }) : null,
      withError.length ? svg("g", { class: "error-bars" }, withError.map(errorBar)) : null,
      choice ? svg("g", { class: "cv-threshold" },
        svg("line", { x1: MARGIN.left, x2: right, y1: thresholdY, y2: thresholdY }),
        svg("text", { class: "label on-plot", x: right - 4, y: thresholdLabelY, "text-anchor": "end" },
            `lowest mean + 1 SE = ${formatNumber(choice.threshold)}`)) : null,
      markers,
      series.map(([key, name]) => svg("g", null,
        polyline(points.map(step => [x(step.index), y(step[key])]), `series-${name}`),
        points.filter(step => Number.isFinite(step[key])).map(step => svg("circle", {
          class: `dot-${name}`, cx: x(step.index), cy: y(step[key]), "data-step": step.index,
          r: step === state.steps[focus] ? 5.5 : 3 })))));
    if (onShow) listen(chart, scales, width);
    plot.replaceChildren(chart, tooltip);
    legendSlot.replaceChildren(legend([
      ...series.map(([, name]) => [`${name} ${metricLabel(pair.name, loss)}`, name === "train" ? "var(--train)" : "var(--validation)"]),
      ...(withError.length ? [[`± 1 standard error (${cv?.folds ?? "the"} folds)`, "var(--validation)"]] : []),
      ...(cv ? [[`lowest mean loss (step ${cv.best_min})`, "var(--cv-min)", true],
                [`one standard error rule (step ${cv.best_1se})`, "var(--cv-1se)", true]] : []),
      ...(choice ? [[`lowest mean + 1 SE (${formatNumber(choice.threshold)})`, "var(--cv-1se)", true]] : []),
      ...(selected !== null && !(cv && [cv.best_min, cv.best_1se].includes(selected)) ? [[`selected step (${selected})`, "var(--selected)"]] : []),
      ...(cv && selected !== null ? [[`chosen: step ${selected} (solid)`, cv.best_min === selected ? "var(--cv-min)" : "var(--cv-1se)"]] : []),
      ...(budgetAt !== null ? [[`rule budget: at most ${formatCount(budget)} terms`, "#6b7280", true]] : [])]));
  }

  function listen(chart, scales, width) {
    const pointAt = event => {
      const box = chart.getBoundingClientRect();
      return nearestStep(event.clientX - box.left, event.clientY - box.top, scales);
    };
    chart.addEventListener("pointermove", event => showTooltip(pointAt(event), scales, width));
    chart.addEventListener("pointerleave", () => { tooltip.hidden = true; });
    chart.addEventListener("blur", () => { tooltip.hidden = true; });
    chart.addEventListener("click", event => { const index = pointAt(event); if (index !== null) onShow(index); });
    chart.addEventListener("keydown", event => {
      const moves = { ArrowLeft: -1, ArrowDown: -1, ArrowRight: 1, ArrowUp: 1, PageDown: -5, PageUp: 5 };
      const from = state.shown ?? selected ?? 0;
      let to = null;
      if (event.key in moves) to = Math.max(0, Math.min(state.steps.length - 1, from + moves[event.key]));
      else if (event.key === "Home") to = 0;
      else if (event.key === "End") to = state.steps.length - 1;
      if (to === null) return;
      event.preventDefault();
      onShow(to);
      plot.querySelector("svg")?.focus();
      showTooltip(to, scales, width);
    });
  }

  drawAtWidth(plot, draw);
  return {
    element,
    show(index) { state.shown = index; draw(); },
    setSteps(newSteps) { state.steps = newSteps; draw(); },
  };
}

function stepValueText(step, loss) {
  return step ? `step ${step.index}: ${stepFacts(step, loss).join(", ")}` : "";
}

/**
 * A grid's cells on one plot: each cell's validation metric (the training one where it has none) against
 * its terms (rules and linear terms, as the budget counts them), the best cell drawn heavier and each cell's
 * selected step dotted.
 * `cells`: [{label, steps, selected, best}].
 */
export function gridChart({ cells, budget = null, loss = null }) {
  const plot = h("div", { class: "chart" });
  const pairs = metricPairs(cells.find(cell => cell.steps.length)?.steps ?? []);
  const pair = pairs.find(candidate => candidate.name === defaultMetric(pairs, loss)) ?? { name: "loss" };
  const key = cells.every(cell => cell.steps.every(step => Number.isFinite(step[pair.val]))) ? pair.val : pair.train;
  const yTitle = `${key === pair.val ? "validation" : "train"} ${metricLabel(pair.name, loss)}`;
  const color = index => CELL_COLORS[index % CELL_COLORS.length];
  drawAtWidth(plot, () => {
    const { width, height } = plotSize(plot);
    const all = cells.flatMap(cell => cell.steps);
    const scales = plotFrame(width, height, extent([...all.map(step => step.n_terms), ...(budget !== null ? [budget] : [])], { zero: true }),
                             extent(all.map(step => step[key])), "terms (rules + linear terms)", yTitle);
    const { x, y } = scales;
    plot.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
                                      "aria-label": `Every cell's path: ${yTitle} against terms` },
      scales.group,
      budget !== null ? svg("line", { class: "budget", x1: x(budget), x2: x(budget), y1: scales.top, y2: scales.bottom }) : null,
      cells.map((cell, index) => svg("g", null,
        polyline(cell.steps.map(step => [x(step.n_terms), y(step[key])]), `cell${cell.best ? " best" : ""}`, `stroke:${color(index)}`),
        cell.steps[cell.selected] ? svg("circle", { cx: x(cell.steps[cell.selected].n_terms), cy: y(cell.steps[cell.selected][key]),
                                                    r: cell.best ? 6 : 4, fill: color(index) }) : null))));
  });
  return h("div", null, plot, legend([...cells.map((cell, index) => [cell.best ? `${cell.label} (chosen)` : cell.label, color(index)]),
                                      ...(budget !== null ? [[`rule budget: at most ${formatCount(budget)} terms`, "#6b7280", true]] : [])]));
}

/** The points of a step function through `values` at `times` (constant until the next time), as an SVG path. */
export function stepPath(points) {
  const defined = points.filter(([px, py]) => Number.isFinite(px) && Number.isFinite(py));
  return defined.map(([px, py], i) => (i ? `H${px.toFixed(2)}V${py.toFixed(2)}` : `M${px.toFixed(2)},${py.toFixed(2)}`)).join("");
}

/**
 * A survival model's curves on its validation rows (a Cox result's `survival`: {times, kaplan_meier, model}): their
 * Kaplan–Meier estimate as a step line beside the mean of the model's curves S(t | x), survival probability (0 to 1)
 * against time. `timeLabel` names the time axis (the time column).
 */
export function survivalChart({ times, kaplan_meier: kaplanMeier, model }, { timeLabel = "time" } = {}) {
  const id = `chart-${chartCount += 1}`;
  const plot = h("div", { class: "chart" });
  drawAtWidth(plot, () => {
    const { width, height } = plotSize(plot);
    const scales = plotFrame(width, height, [0, Math.max(...times) || 1], [0, 1], timeLabel, "survival probability",
                             { wholeX: false });
    const { x, y } = scales;
    plot.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-title` },
      svg("title", { id: `${id}-title` }, "Survival probability against time: the Kaplan–Meier estimate of the validation rows "
          + "and the model's mean curve over them"),
      scales.group,
      svg("path", { class: "curve series-km", d: stepPath(times.map((t, i) => [x(t), y(kaplanMeier[i])])) }),
      polyline(times.map((t, i) => [x(t), y(model[i])]), "curve series-model")));
  });
  return h("div", { class: "survival" }, plot, legend([["Kaplan–Meier estimate (validation rows)", "var(--km)"],
                                                       ["model: mean S(t | x) over the same rows", "var(--model-curve)", true]]));
}

/** The "Survival" card of a Cox path's selected step (`survival`, the result's) on `dataset`'s time column, with
 * `note` (which rows, which step) above the chart. */
export function survivalCard(survival, dataset, note) {
  const section = card("Survival", h("p", { class: "muted" }, note),
                       survivalChart(survival, { timeLabel: dataset ? `time (${dataset.target})` : "time" }));
  section.id = "survival";
  return section;
}

/** Steps between time ticks, in seconds: minutes to days. */
const TIME_STEPS = [60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];

/** Ticks over [low, high] (Unix seconds) at a whole number of minutes, hours or days of local time, at most `count`. */
function timeTicks(low, high, count) {
  const step = TIME_STEPS.find(size => (high - low) / size <= count) ?? TIME_STEPS.at(-1);
  const offset = -new Date(low * 1000).getTimezoneOffset() * 60; // local midnight is a tick of a step of a day
  const ticks = [];
  for (let tick = Math.ceil((low + offset) / step) * step - offset; tick <= high; tick += step) ticks.push(tick);
  return { ticks, step };
}

/** A time in Unix seconds as a tick shows it: the hour and minute, or the day for ticks a day or more apart. */
const timeLabel = (seconds, step) => new Date(seconds * 1000).toLocaleString("en-GB", step >= 86400
  ? { day: "numeric", month: "short" } : { hour: "2-digit", minute: "2-digit" });

/** The path through points [px, py, value], broken where a value is missing (null: a window without rows). */
function brokenPath(points) {
  let moved = false;
  return points.map(([px, py, value]) => {
    if (!Number.isFinite(value)) { moved = false; return ""; }
    const command = `${moved ? "L" : "M"}${px.toFixed(2)},${py.toFixed(2)}`;
    moved = true;
    return command;
  }).join("");
}

/** Dashed lines across the plot at each threshold's value, labelled at their right end; a label that would
 * overlap the one above it joins that one instead ("×2 threshold · ×0.5 threshold"). */
function thresholdLines(thresholds, y, width) {
  const placed = thresholds.map(threshold => ({ ...threshold, at: y(threshold.value), labels: [threshold.label] }))
    .sort((a, b) => a.at - b.at);
  placed.forEach((threshold, index) => {
    const above = placed.slice(0, index).findLast(other => other.labels.length);
    if (above && threshold.at - above.at < 14) { above.labels.push(...threshold.labels); threshold.labels = []; }
  });
  return placed.map(threshold => svg("g", { class: "threshold" },
    svg("line", { x1: MARGIN.left, x2: width - MARGIN.right, y1: threshold.at, y2: threshold.at }),
    threshold.labels.length ? svg("text", { class: "label", x: width - MARGIN.right - 4, y: threshold.at - 4, "text-anchor": "end" },
                                  threshold.labels.join(" · ")) : null));
}

/**
 * Lines over time: each of `lines` ({label, values, title(point index) → a dot's tooltip}) at the middle of
 * each point of `starts` (Unix seconds, each covering `resolution` seconds) over [since, until], broken where a
 * value is null, each value a dot; `thresholds` ([{value, label}]) drawn as dashed lines across. `yTitle` names
 * the y axis and `title` the chart for a screen reader. Returns the chart and its legend.
 */
export function timeSeriesChart({ since, until, starts, resolution, lines, thresholds = [], yTitle, title }) {
  const id = `chart-${chartCount += 1}`;
  const plot = h("div", { class: "chart" });
  const color = index => CELL_COLORS[index % CELL_COLORS.length];
  const times = starts.map(start => Math.min(until, start + resolution / 2));
  drawAtWidth(plot, () => {
    const { width, height } = plotSize(plot);
    const values = [...lines.flatMap(line => line.values), ...thresholds.map(threshold => threshold.value)];
    let step = 3600;
    const ticks = (low, high, count) => { const found = timeTicks(low, high, count); step = found.step; return found.ticks; };
    const scales = plotFrame(width, height, [since, until], extent(values, { zero: true }), "time", yTitle,
                             { ticks, xFormat: tick => timeLabel(tick, step) });
    const { x, y } = scales;
    plot.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-title` },
      svg("title", { id: `${id}-title` }, title),
      scales.group,
      thresholdLines(thresholds, y, width),
      lines.map((line, index) => svg("g", { class: "series", "data-series": line.label },
        svg("path", { class: "line", d: brokenPath(times.map((t, k) => [x(t), y(line.values[k]), line.values[k]])), style: `stroke:${color(index)}` }),
        times.map((t, k) => (Number.isFinite(line.values[k]) ? svg("circle", { cx: x(t), cy: y(line.values[k]), r: 3, fill: color(index) },
          line.title ? svg("title", null, line.title(k)) : null) : null))))));
  });
  return h("div", null, plot, legend([...lines.map((line, index) => [line.label, color(index)]),
                                      ...thresholds.map(threshold => [threshold.label, "#6b7280", true])]));
}
