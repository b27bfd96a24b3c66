// Forests: upload one in a safe format, list them, read one's provenance and draw any of its trees.

import { get, post } from "./api.js";
import { card, dataTable, definitions, fill, formatCount, formatTime, h, idText, link, loadedView,
         pageHeading } from "./dom.js";
import { field, onSubmit } from "./forms.js";
import { treeFigures } from "./trees.js";

const FORMATS = [["", "recognise it"], ["fire-json", "fire JSON"], ["xgboost-json", "XGBoost JSON"],
                 ["lightgbm-json", "LightGBM dump_model() JSON"], ["skops", "skops"]];

function sourceText(forest) {
  const source = forest.source;
  if (source.type === "upload") return `uploaded${source.filename ? ` as ${source.filename}` : ""}`;
  return h("span", null, "trained on ", link(`/dashboard/datasets/${source.dataset_id}`, "a dataset"),
           `: ${source.params.kind}, depth ${source.params.max_depth}`);
}

function uploadForm(datasets, navigate) {
  const file = h("input", { type: "file", required: true, accept: ".json,.skops" });
  const format = h("select", null, FORMATS.map(([value, text]) => h("option", { value }, text)));
  const dataset = h("select", null, h("option", { value: "" }, "don't check"),
                    datasets.map(d => h("option", { value: d.id }, d.source.filename ?? d.id)));
  const slot = h("div");
  const form = h("form", { "aria-label": "Upload a forest" },
    h("div", { class: "fields" },
      field("Forest file", file, { name: "file", help: "pickles are refused" }),
      field("Format", format, { name: "format" }),
      field("Check its features against", dataset, { name: "dataset_id" })),
    h("button", { type: "submit" }, "Upload"), slot);
  onSubmit(form, slot, async () => {
    const body = new FormData();
    body.append("file", file.files[0]);
    const query = new URLSearchParams(Object.entries({ format: format.value, dataset_id: dataset.value }).filter(([, v]) => v));
    const forest = await post(`/v1/forests?${query}`, body);
    navigate(`/dashboard/forests/${forest.id}`);
  });
  return form;
}

export function showForests(main, params, { signal, navigate }) {
  const upload = h("div");
  const list = h("div");
  main.append(pageHeading("Forests"), card("Upload a forest", upload), card("Stored forests", list));
  fill(upload, async () => uploadForm(await get("/v1/datasets", signal), navigate));
  fill(list, async () => dataTable({
    rows: await get("/v1/forests", signal), caption: "Newest first", empty: "No forest yet: upload one, or let a job train one.",
    columns: [
      { label: "Forest", cell: forest => link(`/dashboard/forests/${forest.id}`, idText(forest.id)) },
      { label: "Kind", cell: forest => forest.kind },
      { label: "Trees", numeric: true, cell: forest => formatCount(forest.n_trees) },
      { label: "Leaves", numeric: true, cell: forest => formatCount(forest.n_leaves) },
      { label: "Source", cell: sourceText },
      { label: "Created", cell: forest => formatTime(forest.created_at) },
    ] }));
}

export function showForest(main, { forestId }, { signal }) {
  loadedView(main, "Forest", async () => {
    const forest = await get(`/v1/forests/${encodeURIComponent(forestId)}`, signal);
    const tree = h("input", { type: "number", min: 0, max: forest.n_trees - 1, step: 1, value: 0 });
    const drawing = h("div");
    const draw = () => fill(drawing, async () =>
      treeFigures(await get(`/v1/forests/${forest.id}/trees?tree=${tree.value}`, signal), new Map(), { fold: false }));
    const form = h("form", { "aria-label": "Draw a tree", class: "toolbar",
                             onsubmit: event => { event.preventDefault(); draw(); } },
                   field("Tree", tree, { name: "tree", help: `0 to ${forest.n_trees - 1}` }), h("button", { type: "submit" }, "Draw"));
    draw();
    return { title: `Forest ${forest.id}`, content: [
      card("Forest", definitions([
        ["id", idText(forest.id)], ["kind", forest.kind], ["trees", formatCount(forest.n_trees)],
        ["leaves (candidate rules)", formatCount(forest.n_leaves)], ["features", formatCount(forest.n_features)],
        ["source", sourceText(forest)], ["created", formatTime(forest.created_at)]]),
        h("p", null, "Features: ", forest.feature_names.map(name => h("span", { class: "tag" }, name)).flatMap(tag => [tag, " "]))),
      card("Trees", form, drawing),
    ] };
  });
}
