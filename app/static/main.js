// Every /dashboard/ URL is one view of this page: links between views change the URL without a reload,
// and any URL can be shared, bookmarked and reloaded.

import { apiKey } from "./api.js";
import { showDataset, showDatasets } from "./datasets.js";
import { h, link, pageHeading } from "./dom.js";
import { showForest, showForests } from "./forests.js";
import { showJob } from "./job.js";
import { showJobs } from "./jobs.js";
import { showModel, showModels } from "./models.js";
import { showSubmitForm } from "./submit.js";

const ROUTES = [
  ["/dashboard/", showJobs],
  ["/dashboard/jobs", showJobs],
  ["/dashboard/jobs/new", showSubmitForm],
  ["/dashboard/jobs/:jobId", showJob],
  ["/dashboard/jobs/:jobId/steps/:step", showJob],
  ["/dashboard/datasets", showDatasets],
  ["/dashboard/datasets/:datasetId", showDataset],
  ["/dashboard/forests", showForests],
  ["/dashboard/forests/:forestId", showForest],
  ["/dashboard/models", showModels],
  ["/dashboard/models/:modelId", showModel],
].map(([pattern, view]) => ({
  view,
  names: [...pattern.matchAll(/:(\w+)/g)].map(found => found[1]),
  regex: new RegExp(`^${pattern.replace(/:\w+/g, "([^/]+)")}/?$`),
}));

function showNotFound(main) {
  main.append(pageHeading("No such page"),
              h("p", null, "This address is not a view of the dashboard. Go to the ", link("/dashboard/jobs", "jobs"), "."));
}

function route(pathname) {
  for (const { view, names, regex } of ROUTES) {
    const found = regex.exec(pathname);
    if (found) return { view, params: Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1])])) };
  }
  return { view: showNotFound, params: {} };
}

let current = null; // {view, controller, update}: the view on screen

function markNavigation() {
  const path = location.pathname === "/dashboard/" ? "/dashboard/jobs" : location.pathname;
  const anchors = [...document.querySelectorAll("nav a[href^='/dashboard/']")];
  const here = anchors.filter(anchor => path === anchor.pathname || path.startsWith(`${anchor.pathname}/`))
    .sort((a, b) => b.pathname.length - a.pathname.length)[0];
  for (const anchor of anchors) {
    if (anchor === here) anchor.setAttribute("aria-current", "page");
    else anchor.removeAttribute("aria-current");
  }
}

/** Show the view of the current URL; `moveFocus` after a navigation inside the page. */
function render(moveFocus) {
  const { view, params } = route(location.pathname);
  params.query = new URLSearchParams(location.search);
  markNavigation();
  if (current?.view === view && current.update?.(params)) return;
  current?.controller.abort();
  const controller = new AbortController();
  const main = document.getElementById("view");
  main.replaceChildren();
  current = { view, controller, update: null };
  current.update = view(main, params, { signal: controller.signal, navigate }) ?? null;
  if (moveFocus) main.querySelector("h1")?.focus();
}

/** Go to `path` (a /dashboard/ URL) as a link would. */
export function navigate(path, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render(!replace);
}

function followLinksInPage(event) {
  const anchor = event.target.closest("a[href]");
  if (!anchor || event.defaultPrevented || event.button !== 0 || anchor.target || anchor.hasAttribute("download")
      || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
  const url = new URL(anchor.href);
  if (url.origin !== location.origin || !url.pathname.startsWith("/dashboard/")) return;
  event.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) navigate(url.pathname + url.search);
}

function setUpApiKey() {
  const form = document.getElementById("api-key-form");
  const input = form.elements["api-key"];
  const state = document.getElementById("api-key-state");
  const show = () => { state.textContent = apiKey.get() ? "key set for this tab" : "no key"; };
  input.value = apiKey.get();
  show();
  form.addEventListener("submit", event => {
    event.preventDefault();
    apiKey.set(input.value.trim());
    show();
    render(false);
  });
}

document.addEventListener("click", followLinksInPage);
window.addEventListener("popstate", () => render(true));
setUpApiKey();
render(false);
