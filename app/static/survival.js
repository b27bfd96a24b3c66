// A Cox model's survival curve of one row, S(t | x) against time, drawn with the dashboard's chart frame
// (chart.js) from the values /predict answers, with those values in a table beside it.

import { drawAtWidth, legend, plotFrame, plotSize, stepPath } from "./chart.js";
import { dataTable, formatNumber, h, svg } from "./dom.js";

const MAX_TIMES = 400; // a curve's points: at most this many of the model's times (a chart is at most ~1,200 px wide)
let chartCount = 0;

/** The times a row's curve is asked for: 0, then the times of the model's baseline hazard (its event times, where
 * S(t | x) steps down, and the training rows' last follow-up time, where it ends), evenly thinned to MAX_TIMES. */
export function curveTimes(model) {
  const times = model.ensemble.baseline_hazard.times;
  const every = Math.ceil(times.length / MAX_TIMES);
  return [0, ...times.filter((time, i) => time > 0 && (i % every === 0 || i === times.length - 1))];
}

/** The first of `times` where the curve is at or below one half (null where it stays above up to the end). */
export function medianTime(times, survival) {
  const index = survival.findIndex(value => value <= 0.5);
  return index < 0 ? null : times[index];
}

/** One row's S(t | x) (`survival` at `times`, from 0 to the last follow-up) as a step line, its median time marked
 * where it has one, and the values in a folded table. `timeLabel` names the time axis (the time column). */
export function rowSurvivalChart(times, survival, { timeLabel = "time" } = {}) {
  const id = `survival-row-${chartCount += 1}`;
  const plot = h("div", { class: "chart" });
  const median = medianTime(times, survival);
  const end = times.at(-1);
  drawAtWidth(plot, () => {
    const { width, height } = plotSize(plot);
    const scales = plotFrame(width, height, [0, end || 1], [0, 1], timeLabel, "survival probability", { wholeX: false });
    const { x, y } = scales;
    plot.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-labelledby": `${id}-title` },
      svg("title", { id: `${id}-title` }, `This row's survival probability S(t | x) from time 0 to ${formatNumber(end)}, the last `
          + "follow-up time of the training rows"),
      scales.group,
      median !== null ? svg("g", { class: "median" },
        svg("line", { x1: x(median), x2: x(median), y1: y(0.5), y2: scales.bottom }),
        svg("text", { class: "label", x: x(median) + 4, y: y(0.5) - 4 }, `median ${formatNumber(median)}`)) : null,
      svg("path", { class: "curve series-row", d: stepPath(times.map((t, i) => [x(t), y(survival[i])])),
                    "data-points": times.length })));
  });
  return h("div", { class: "survival", id: "row-survival" },
    h("p", { "data-field": "median" }, median !== null
      ? `Half of rows like this one have had the event by time ${formatNumber(median)} (S(t | x) ≤ 0.5 from there on).`
      : `S(t | x) stays above 0.5 up to ${formatNumber(end)}, the last follow-up time of the training rows: the median `
        + "time of rows like this one is later than the data reach."),
    plot, legend([["this row: S(t | x), the probability of no event by time t", "var(--model-curve)"]]),
    h("details", null, h("summary", null, `The curve's values (${times.length} times)`),
      dataTable({ caption: "S(t | x) at each time the model's baseline hazard steps (and at 0)", rows: times.map((t, i) => [t, survival[i]]),
                  columns: [{ label: "Time", numeric: true, cell: ([t]) => formatNumber(t, 6) },
                            { label: "S(t | x)", numeric: true, cell: ([, value]) => formatNumber(value, 6) }] })));
}
