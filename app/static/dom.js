// Small helpers to build the page: elements, numbers and times as text, tables, problem messages.

import { ApiError } from "./api.js";

const PROPERTIES = new Set(["value", "checked", "selected", "disabled", "hidden", "open", "indeterminate"]);

function append(parent, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else parent.append(child instanceof Node ? child : String(child));
  }
}

function build(element, props, children) {
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (PROPERTIES.has(name)) element[name] = value;
    else element.setAttribute(name === "className" ? "class" : name, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

/** An HTML element: `h("a", {href: "/x", class: "id"}, "text", otherNode)`; `on…` props are listeners. */
export const h = (tag, props, ...children) => build(document.createElement(tag), props, children);

/** An SVG element, built like `h`. */
export const svg = (tag, props, ...children) =>
  build(document.createElementNS("http://www.w3.org/2000/svg", tag), props, children);

const significant = new Map();

/** A number with `digits` significant digits ("—" for none); exponents only where they are shorter. */
export function formatNumber(value, digits = 4) {
  if (value === null || value === undefined || value === "") return "—";
  const x = Number(value);
  if (!Number.isFinite(x)) return String(value);
  const size = Math.abs(x);
  if (size !== 0 && (size >= 1e7 || size < 1e-4)) return x.toExponential(digits - 1);
  if (!significant.has(digits)) {
    significant.set(digits, new Intl.NumberFormat("en-US", { maximumSignificantDigits: digits, useGrouping: false }));
  }
  return significant.get(digits).format(x);
}

export function formatSigned(value, digits = 4) {
  const text = formatNumber(value, digits);
  return Number(value) > 0 ? `+${text}` : text;
}

export const formatCount = value => (value === null || value === undefined ? "—" : Number(value).toLocaleString("en-US"));

export function formatDuration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 1) return `${formatNumber(seconds * 1000, 3)} ms`;
  if (seconds < 120) return `${formatNumber(seconds, 3)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 120 ? `${minutes} min ${Math.round(seconds % 60)} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

export function formatTime(epochSeconds) {
  if (!epochSeconds) return "—";
  return new Date(epochSeconds * 1000).toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "medium" });
}

export function formatBytes(bytes) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let size = bytes, unit = 0;
  while (size >= 1024 && unit < units.length - 1) { size /= 1024; unit += 1; }
  return `${formatNumber(size, 3)} ${units[unit]}`;
}

/** A field's name in words: "val_loss" → "val loss", "n_lambdas" → "number of lambdas". */
export const fieldLabel = name => name.replace(/^n_/, "number of ").replaceAll("_", " ");

export const idText = id => h("code", { class: "id" }, id);

export const link = (href, ...children) => h("a", { href }, ...children);

export const statusBadge = status => h("span", { class: `status status-${status}` }, status);

/** The view's heading, also the tab's title; focused after a navigation. */
export function pageHeading(text) {
  const heading = h("h1", { tabindex: "-1" });
  retitle(heading, text);
  return heading;
}

/** A new text for the view's heading and the tab's title (once what the view shows has loaded). */
export function retitle(heading, text) {
  heading.textContent = text;
  document.title = `${text} · FIRE rules`;
}

/** A titled section of a view. */
export const card = (title, ...children) => h("section", { class: "card" }, h("h2", null, title), ...children);

/** Terms and values, [term, value, field?] (`field` names the value for scripts and tests as
 * `data-field`); pairs whose value is null or undefined are left out. */
export function definitions(pairs) {
  return h("dl", { class: "definitions" },
    pairs.filter(([, value]) => value !== null && value !== undefined)
      .map(([term, value, field]) => h("div", null, h("dt", null, term), h("dd", { "data-field": field }, value))));
}

/** One row of a `dataTable`: a cell per column, each labelled for the narrow layout. */
export function tableRow(columns, row, props) {
  return h("tr", props, columns.map(column =>
    h("td", { "data-label": column.label, class: cellClass(column) }, column.cell(row))));
}

/** A column's cell class: "num" or "wide", and the column's own `className` (e.g. shown on one layout only). */
const cellClass = column => [column.numeric ? "num" : column.wide ? "wide" : null, column.className].filter(Boolean).join(" ") || null;

/**
 * A table whose rows become labelled cards on a narrow screen. `columns`: [{label, cell: row => content,
 * numeric, wide, className}] (a wide cell takes the card's width there; `className` "wide-only" or
 * "narrow-only" shows a column on one layout only), `rowProps(row)`: attributes of each row.
 */
export function dataTable({ caption, columns, rows, rowProps, empty = "Nothing yet." }) {
  if (!rows.length) return h("p", { class: "muted" }, empty);
  const head = h("tr", null, columns.map(column => h("th", { scope: "col", class: [column.numeric ? "num" : null, column.className]
    .filter(Boolean).join(" ") || null }, column.label)));
  return h("table", { class: "data" }, caption ? h("caption", null, caption) : null,
           h("thead", null, head), h("tbody", null, rows.map(row => tableRow(columns, row, rowProps?.(row)))));
}

// what an answer that is not a success means, in words: a status number is for programs
const OUTCOMES = {
  0: "The service did not answer", 400: "Not accepted", 401: "An API key is needed", 403: "Not allowed",
  404: "Not found", 405: "Not possible here", 409: "Not possible now", 410: "No longer kept", 413: "Too large",
  415: "Not a supported kind of file", 422: "Please check", 429: "Too busy: try again shortly",
  503: "The service is not available now",
};
const outcome = status => OUTCOMES[status] ?? (status >= 500 ? "The service failed" : "Not accepted");

/** Where a fault is, in words: `body.forest.max_depth` → "forest › max depth", `query.target` → "target". */
export const faultPlace = field => field.replace(/^(body|query|path|header)(\.|$)/, "").split(".").filter(Boolean)
  .map(part => part.replaceAll("_", " ")).join(" › ");

/** The problem the API reported, for people: what it means, its detail and the faults in `faults` (by default every
 * one; a form passes those it could not show at their fields), each with where it is, what is wrong and the fix. */
export function problemAlert(error, { faults = error.problem?.errors ?? [], placed = 0 } = {}) {
  if (!(error instanceof ApiError)) {
    return h("div", { class: "problem", role: "alert" }, h("p", null, error.message));
  }
  return h("div", { class: "problem", role: "alert" },
    h("p", null, h("strong", null, outcome(error.status), ": "), error.problem.detail || "",
      placed ? ` ${placed === 1 ? "It is" : "Each is"} shown at its field.` : ""),
    faults.length ? h("ul", null, faults.map(fault => h("li", null,
      faultPlace(fault.field ?? "") ? [h("strong", null, faultPlace(fault.field)), ": "] : null, fault.message,
      fault.fix ? [" — ", h("span", { class: "fix" }, fault.fix)] : null))) : null,
    error.status === 401 ? h("button", { type: "button", class: "secondary", onclick: () => document.getElementById("api-key").focus() },
                             "Enter the API key") : null);
}

const loading = (text = "Loading…") => h("p", { class: "muted", role: "status" }, text);

/** A view of one stored thing: `load()` gives {title, content} (the heading's title once loaded). */
export function loadedView(main, title, load) {
  const heading = pageHeading(title);
  const body = h("div");
  main.append(heading, body);
  fill(body, async () => {
    const loaded = await load();
    retitle(heading, loaded.title);
    return loaded.content;
  });
}

/** Replace the content of `target` with whatever `load()` builds, or the API's problem. */
export async function fill(target, load) {
  target.replaceChildren(loading());
  try {
    target.replaceChildren(...[await load()].flat(Infinity).filter(Boolean));
  } catch (error) {
    if (error.name === "AbortError") return;
    target.replaceChildren(problemAlert(error));
  }
}
