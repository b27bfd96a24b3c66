// The accuracy–stability–size frontier of a cross-validated job (its result's cv.frontier, the library's
// solver.path.stability_frontier): every step within the rule budget by its folds' Dice index against its mean
// validation loss (or its terms), the frontier's steps marked, each opening its step, and a sentence placing the
// selected step on it.

import { drawAtWidth, extent, labelWidth, legend, metricLabel, plotFrame, plotSize, selectControl,
         termsText } from "./chart.js";
import { card, formatCount, formatNumber, h, svg } from "./dom.js";

/** A change of a loss in percent, signed: "+2.8%", "-0.4%". */
const percent = (value, from) => {
  const change = 100 * (value / from - 1);
  return `${change > 0 ? "+" : ""}${change.toFixed(1)}%`;
};

/** A step's loss with its standard error where it has one: "4.912 ± 0.0921". */
const withError = step => formatNumber(step.val_loss) + (Number.isFinite(step.val_loss_se) ? ` ± ${formatNumber(step.val_loss_se)}` : "");

/**
 * Where the selected step of `result` stands on its frontier, its numbers the API's: on it, with the most accurate
 * frontier step more stable than it and what that costs; or not on it, with the frontier step that beats it on all
 * three (the most stable of those).
 */
export function frontierSentence(result, loss) {
  const { frontier, stability } = result.cv;
  const k = result.selected, step = result.steps[k];
  const lossName = `mean validation ${metricLabel("loss", loss)}`;
  const selected = `The selected step ${k} (${termsText(step)})`;
  const on = frontier.find(point => point.step === k);
  if (on) {
    const stabler = frontier.filter(point => point.dice > on.dice)
      .sort((a, b) => a.val_loss - b.val_loss || a.n_terms - b.n_terms || a.step - b.step);
    if (!stabler.length) return `${selected} is on the frontier, and no step on it is more stable (folds' Dice ${formatNumber(on.dice, 3)}).`;
    const next = stabler[0];
    return `${selected} is on the frontier: no step has as few terms, as low a ${lossName} and as high a folds' Dice `
      + `index together. The most accurate step more stable than it is step ${next.step} (${termsText(next)}): folds' `
      + `Dice ${formatNumber(next.dice, 3)} against ${formatNumber(on.dice, 3)}, ${lossName} ${withError(next)} against `
      + `${withError(on)} (${percent(next.val_loss, on.val_loss)}).`;
  }
  const dice = stability.dice[k];
  const better = frontier.filter(point => point.n_terms <= step.n_terms && point.val_loss <= step.val_loss && point.dice >= dice)
    .sort((a, b) => b.dice - a.dice || a.val_loss - b.val_loss || a.n_terms - b.n_terms || a.step - b.step);
  if (!better.length) return `${selected} is not on the frontier.`;
  const best = better[0];
  return `${selected} is not on the frontier: step ${best.step} (${termsText(best)}) is at least as good on all three, `
    + `folds' Dice ${formatNumber(best.dice, 3)} against ${formatNumber(dice, 3)}, ${lossName} ${withError(best)} `
    + `against ${withError(step)}, ${formatCount(best.n_terms)} terms against ${formatCount(step.n_terms)}.`;
}

/** Labels of the frontier's points placed where they overlap no other label, nothing drawn round a point (`dots`:
 * [px, py, radius] each) and stay in the plot: above their point, else below, right or left, clear of what is drawn
 * there (the selected step's ring, whose label goes first); points drawn at one place share a label ("1, 2"). */
function pointLabels(points, dots, scales, left, right) {
  const groups = new Map();
  for (const point of points) {
    const key = `${Math.round(point.px)},${Math.round(point.py)}`;
    if (!groups.has(key)) {
      const here = dots.filter(([px, py]) => Math.hypot(px - point.px, py - point.py) < 1);
      groups.set(key, { ...point, steps: [], gap: Math.max(6, ...here.map(([, , r]) => r)) + 3 });
    }
    groups.get(key).steps.push(point.step);
  }
  const placed = [];
  const overlaps = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
  const covers = box => dots.some(([px, py, r]) => px + r > box.x0 && px - r < box.x1 && py + r > box.y0 && py - r < box.y1);
  for (const { px, py, gap, steps } of [...groups.values()].sort((a, b) => b.gap - a.gap)) {
    const text = steps.join(", "), width = labelWidth(text);
    const spots = [[px, py - gap, "middle", px - width / 2], [px, py + gap + 10, "middle", px - width / 2],
                   [px + gap, py + 4, "start", px + gap], [px - gap, py + 4, "end", px - gap - width]];
    for (const [x, y, anchor, x0] of spots) {
      const box = { x0, x1: x0 + width, y0: y - 10, y1: y + 2 };
      if (box.x0 < left || box.x1 > right || box.y0 < scales.top || box.y1 > scales.bottom) continue;
      if (placed.some(other => overlaps(box, other.box)) || covers(box)) continue;
      placed.push({ x, y, anchor, text, box });
      break;
    }
  }
  return placed.map(label => svg("text", { class: "label on-plot", x: label.x, y: label.y, "text-anchor": label.anchor }, label.text));
}

/**
 * The card of a cross-validated result's frontier (null without one): its chart, with the axis across chosen
 * (mean validation loss or terms), and the sentence on the selected step. `onShow(k)` opens step k.
 */
export function frontierCard(result, loss, onShow) {
  const frontier = result.cv?.frontier, dice = result.cv?.stability?.dice;
  if (!frontier || !dice) return null;
  const budget = result.parameters.path.max_rules ?? null;
  const steps = result.steps.filter(step => (budget === null || step.n_terms <= budget) && Number.isFinite(step.val_loss));
  const onFrontier = new Set(frontier.map(point => point.step));
  const lossLabel = metricLabel("loss", loss);
  const state = { x: "val_loss" };
  const plot = h("div", { class: "chart" });
  const legendSlot = h("div");
  const facts = step => `step ${step.index}${onFrontier.has(step.index) ? " (on the frontier)" : ""}: ${termsText(step)}; `
    + `mean validation ${lossLabel} ${withError(step)}; folds' Dice ${formatNumber(dice[step.index], 3)}`;

  function draw() {
    const { width, height } = plotSize(plot);
    const onLoss = state.x === "val_loss";
    const xs = onLoss ? [...steps.map(step => step.val_loss), ...frontier.flatMap(point => Number.isFinite(point.val_loss_se)
      ? [point.val_loss - point.val_loss_se, point.val_loss + point.val_loss_se] : [])] : steps.map(step => step.n_terms);
    // terms: whole numbers, the first (0, the intercept alone) clear of the axis
    const xDomain = onLoss ? extent(xs) : [-0.5, Math.max(...xs) + 0.5];
    const scales = plotFrame(width, height, xDomain, extent([0, 1, ...steps.map(step => dice[step.index])]),
                             onLoss ? `mean validation ${lossLabel}` : "terms (rules + linear terms)",
                             "folds' Dice index", { wholeX: !onLoss });
    const { x, y } = scales;
    const at = step => [x(step[state.x]), y(dice[step.index])];
    const points = frontier.map(point => {
      const step = result.steps[point.step];
      const [px, py] = at(step);
      return { step: point.step, px, py, record: step, point };
    });
    const selected = result.steps[result.selected];
    const ring = steps.includes(selected) ? at(selected) : null;
    const open = event => { onShow(Number(event.currentTarget.dataset.step)); };
    const keyOpen = event => { if (event.key === "Enter" || event.key === " ") { event.preventDefault(); open(event); } };
    plot.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "group",
                                      "aria-label": `Every step's folds' Dice index against its ${onLoss ? `mean validation ${lossLabel}` : "terms"}; `
                                        + "the frontier's steps open their step" },
      scales.group,
      svg("g", null, steps.filter(step => !onFrontier.has(step.index)).map(step => {
        const [px, py] = at(step);
        return svg("circle", { class: "frontier-other", cx: px, cy: py, r: 3, "data-step": step.index }, svg("title", null, facts(step)));
      })),
      onLoss ? svg("g", { class: "error-bars" }, points.filter(p => Number.isFinite(p.point.val_loss_se)).map(p => {
        const low = x(p.point.val_loss - p.point.val_loss_se), high = x(p.point.val_loss + p.point.val_loss_se);
        return svg("g", null, svg("line", { x1: low, x2: high, y1: p.py, y2: p.py }),
                   svg("line", { x1: low, x2: low, y1: p.py - 3, y2: p.py + 3 }), svg("line", { x1: high, x2: high, y1: p.py - 3, y2: p.py + 3 }));
      })) : null,
      ring ? svg("circle", { class: "frontier-selected", cx: ring[0], cy: ring[1], r: 10 }) : null,
      svg("g", null, points.map(p => svg("circle", {
        class: "frontier-point", cx: p.px, cy: p.py, r: 6, "data-step": p.step, tabindex: 0, role: "link",
        "aria-label": `Open ${facts(p.record)}`, onclick: open, onkeydown: keyOpen }, svg("title", null, facts(p.record))))),
      pointLabels(points, [...steps.map(step => [...at(step), 6]), ...(ring ? [[...ring, 11]] : [])], scales, x(xDomain[0]),
                  x(xDomain[1]))));
    legendSlot.replaceChildren(legend([["step on the frontier (its number beside it)", "var(--validation)", false, "dot"],
      ["another step within the budget", "#9aa3b2", false, "dot"],
      [`the selected step (${result.selected})`, "var(--selected)", false, "ring"],
      ...(onLoss ? [["± 1 standard error of a frontier step's mean loss", "var(--validation)"]] : [])]));
  }

  const controls = h("div", { class: "toolbar" }, selectControl("frontier-x", "Across",
    [["val_loss", `mean validation ${lossLabel}`], ["n_terms", "terms"]], state.x, value => { state.x = value; draw(); }));
  drawAtWidth(plot, draw);
  const section = card("Accuracy, stability and size",
    h("p", { class: "muted" }, `Each step within the rule budget by how alike its ${result.cv.folds} folds' rules are (their `
      + `Dice index: 1, every fold selected the same terms) against its mean validation ${lossLabel} or its terms. On the `
      + "frontier, no other step has as few terms, as low a loss and as high a Dice index together: click one to see its rules."),
    controls, plot, legendSlot,
    h("p", { id: "frontier-choice" }, frontierSentence(result, loss)));
  section.id = "frontier";
  return section;
}
