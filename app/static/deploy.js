// Serving a model: its name's aliases (point one at this version, move or remove it), the addresses apps score
// it at (by name, version or alias; our JSON, MLflow's scoring server, the Open Inference Protocol), the exports
// to download, and the name's history.

import { download, put, remove } from "./api.js";
import { card, dataTable, formatTime, h, problemAlert } from "./dom.js";
import { field, onSubmit } from "./forms.js";

const enc = encodeURIComponent;

/** The card of `model`'s name: aliases, scoring addresses, downloads and history; `refresh()` redraws the page
 * after an alias changed (the versions table and the model's own facts show aliases too). */
export function deployCard(model, registered, refresh) {
  const change = async action => { await action(); refresh(); };
  return card("Serve and deploy", ...content(model, registered, change));
}

function content(model, registered, change) {
  const name = `/v1/registered-models/${enc(model.name)}`;
  const mine = Object.entries(registered.aliases).filter(([, version]) => version === model.version).map(([alias]) => alias);
  return [
    aliasesView(model, registered, name, change),
    h("h3", null, "Score it from an app"),
    h("p", { class: "muted" }, "Every answer names the version that answered (X-Model-Version). An alias follows each move "
      + "without a redeploy."),
    dataTable({ caption: "Scoring addresses", columns: [
      { label: "Which", cell: row => row[0] },
      { label: "Address", cell: row => h("code", { class: "address" }, row[1]) },
    ], rows: [
      ["this version (our JSON or CSV)", `POST ${name}/versions/${model.version}/predict`],
      ...mine.map(alias => [`alias ${alias} (MLflow's scoring server)`, `POST ${name}/aliases/${enc(alias)}/invocations`]),
      ...mine.map(alias => [`alias ${alias} (Open Inference Protocol)`, `POST /v2/models/${enc(model.name)}/versions/${enc(alias)}/infer`]),
      ["the latest version", `POST ${name}/predict`],
      ["this version (Open Inference Protocol)", `POST /v2/models/${enc(model.name)}/versions/${model.version}/infer`],
    ] }),
    h("h3", null, "Download"),
    downloads(model),
    h("h3", null, `History of ${model.name}`),
    dataTable({ caption: "What happened to the name", rows: [...registered.history].reverse(), columns: [
      { label: "When", cell: event => formatTime(event.at) },
      { label: "What", cell: event => eventText(event) },
    ] }),
  ];
}

function aliasesView(model, registered, name, change) {
  const aliases = Object.entries(registered.aliases);
  const aliasInput = h("input", { type: "text", required: true, pattern: "[A-Za-z][A-Za-z0-9_\\-]{0,63}", placeholder: "champion" });
  const slot = h("div");
  const form = h("form", { class: "inline-form", "aria-label": "Point an alias at this version" },
    field("Alias", aliasInput, { name: "alias", help: "champion, staging, …: moves it here if it points elsewhere" }),
    h("button", { type: "submit" }, `Point at v${model.version}`), slot);
  onSubmit(form, slot, () => change(() => put(`${name}/aliases/${enc(aliasInput.value.trim())}`, { version: model.version })));
  const removeButton = alias => h("button", { type: "button", class: "secondary", "aria-label": `Remove alias ${alias}`,
    onclick: async event => {
      event.target.disabled = true;
      try {
        await change(() => remove(`${name}/aliases/${enc(alias)}`));
      } catch (error) {
        event.target.replaceWith(problemAlert(error));
      }
    } }, "Remove");
  return h("div", { id: "aliases" },
    h("h3", null, `Aliases of ${model.name}`),
    aliases.length ? dataTable({ caption: "Aliases", rows: aliases, columns: [
      { label: "Alias", cell: ([alias]) => h("strong", null, alias) },
      { label: "Version", cell: ([, version]) => (version === model.version ? `v${version} (this one)` : `v${version}`) },
      { label: "", cell: ([alias]) => removeButton(alias) },
    ], rowProps: ([, version]) => ({ class: version === model.version ? "chosen" : null }) })
      : h("p", { class: "muted" }, "No alias yet: apps can score the name's latest version or a version number."),
    form);
}

function downloads(model) {
  const slot = h("div");
  const button = (format, label) => h("button", { type: "button", class: "secondary", onclick: async () => {
    slot.replaceChildren();
    try {
      await download(`/v1/models/${enc(model.id)}/export?format=${format}`, `${model.name}-v${model.version}.${format}`);
    } catch (error) {
      slot.replaceChildren(problemAlert(error));
    }
  } }, label);
  return h("div", { class: "downloads" },
    button("sql", "SQL expression"), button("python", "Python module"), button("mlflow", "MLflow model (zip)"),
    h("p", { class: "muted" }, "Each gives the served predictions exactly. The MLflow model loads with "
      + "mlflow.pyfunc.load_model and serves with mlflow models serve --env-manager local."), slot);
}

function eventText(event) {
  switch (event.event) {
    case "version_added": return `version ${event.version} promoted`;
    case "version_deleted": return `version ${event.version} deleted`;
    case "alias_set": return event.previous_version
      ? `${event.alias} moved from v${event.previous_version} to v${event.version}` : `${event.alias} set to v${event.version}`;
    case "alias_removed": return `${event.alias} removed (was v${event.version})`;
    default: return event.event;
  }
}
