// Submitting a path job. Every setting is drawn from the API's own request schema in /openapi.json, with
// its default prefilled and its description as help, so a setting the API gains appears here by itself.

import { get, post, schema } from "./api.js";
import { fieldLabel, fill, formatCount, h, pageHeading } from "./dom.js";
import { field, onSubmit } from "./forms.js";

const LABELS = {
  penalty: "Penalty", gamma: "γ (MCP concavity)", fusion_ratio: "Fusion ratio (λf / λs)", lambda_f: "Fixed λf",
  max_rules: "Rule budget (most terms)", n_lambdas: "λ steps", lambda_min_ratio: "Smallest λ / λ max",
  lambdas: "Explicit λs grid", tol: "Tolerance", max_iter: "Most passes per step", block_selection: "Block selection",
  inner_iters: "Fused steps per tree visit", mcp_scaling: "MCP scaling",
  candidates: "Candidate rules", max_rule_length: "Longest rule (conditions)", linear_terms: "Linear terms",
  linear_quantile: "Linear terms clipped at quantile",
  kind: "Forest kind", n_estimators: "Trees", max_depth: "Depth", max_features: "Features tried per split",
  learning_rate: "Learning rate (boosting)", random_state: "Forest seed", fraction: "Holdout fraction", seed: "Holdout seed",
  threshold_bins: "Split only at quantiles (bins)", cv_folds: "Cross-validation folds", selection: "Step chosen by",
  stability_resamples: "Stability: half-sample fits", power: "Tweedie power",
};
const MAIN_SETTINGS = ["penalty", "gamma", "fusion_ratio", "lambda_f", "max_rules", "n_lambdas"];
// which terms the path may select: rules from leaves or every node, their length, linear terms
const TERM_SETTINGS = ["candidates", "max_rule_length", "linear_terms", "linear_quantile"];
// how far the rules can be trusted: the step cross-validated (with error bars) and the rules refitted on resamples
const TRUST_SETTINGS = ["cv_folds", "selection", "stability_resamples"];
const OWN_CONTROLS = new Set(["dataset_id", "forest_id", "forest", "validation", "grid", "loss", "power"]);
/** The alternatives a property allows: its types, its enum values, whether null is one. */
function kinds(property) {
  const options = property.anyOf ?? [property];
  return {
    nullable: options.some(option => option.type === "null"),
    numeric: options.find(option => option.type === "number" || option.type === "integer"),
    list: options.find(option => option.type === "array"),
    flag: options.some(option => option.type === "boolean"),
    choices: options.flatMap(option => option.enum ?? []),
  };
}

const parseNumbers = text => text.split(/[\s,;]+/).filter(Boolean).map(Number);

/**
 * An input for one request property (`name` as the API calls it, `path` its place in the body for errors):
 * {element, read()}; read() gives undefined to leave the API's default.
 */
function settingControl(name, property, path = name) {
  const { nullable, numeric, list, flag, choices } = kinds(property);
  const fallback = property.default ?? null;
  let control, read;
  if (flag) {
    control = h("input", { type: "checkbox", checked: Boolean(fallback) });
    read = () => control.checked;
  } else if (choices.length && !numeric) {
    control = h("select", null, nullable ? h("option", { value: "" }, "auto") : null,
                choices.map(choice => h("option", { value: choice, selected: choice === fallback }, choice)));
    read = () => (control.value === "" ? null : control.value);
  } else if (list) {
    control = h("input", { type: "text", inputmode: "decimal", placeholder: "not set: comma-separated numbers",
                           value: Array.isArray(fallback) ? fallback.join(", ") : "" });
    read = () => (control.value.trim() ? parseNumbers(control.value) : undefined);
  } else if (numeric && !choices.length) {
    control = h("input", { type: "number", step: numeric.type === "integer" ? 1 : "any", max: numeric.maximum,
                           min: numeric.minimum, value: fallback ?? "", placeholder: nullable ? "not set" : null });
    read = () => (control.value === "" ? (nullable && fallback !== null ? null : undefined) : Number(control.value));
  } else {
    const options = h("datalist", { id: `${path}-choices` }, choices.map(choice => h("option", { value: choice })));
    control = h("input", { type: "text", list: options.id, value: fallback ?? "", placeholder: nullable ? "not set" : null });
    read = () => {
      const text = control.value.trim();
      if (!text) return nullable ? null : undefined;
      return Number.isFinite(Number(text)) ? Number(text) : text;
    };
    return { element: h("div", null, field(LABELS[name] ?? fieldLabel(name), control, { help: property.description, name: path }), options), read };
  }
  return { element: field(LABELS[name] ?? fieldLabel(name), control, { help: property.description, name: path }), read };
}

/** The loss: left to the dataset's task (the first choice, naming the loss it means: the first of the API's losses
 * made for that task, GET /v1/losses) or one of them; the Tweedie power beside it, offered while the loss is Tweedie.
 * {element, read(), loss(), update(task)}. */
function lossSettings(properties, losses) {
  const taskChoice = h("option", { value: "" }, "the dataset's task decides");
  const loss = h("select", null, taskChoice, losses.map(({ name }) => h("option", { value: name }, name)));
  const power = settingControl("power", properties.power);
  let task = null;
  const taskLoss = () => losses.find(candidate => candidate.task === task)?.name;
  const chosen = () => loss.value || taskLoss() || null;
  const update = newTask => {
    task = newTask ?? task;
    taskChoice.textContent = taskLoss() ? `${taskLoss()} (the dataset's task, ${task}, decides)` : "the dataset's task decides";
    power.element.hidden = chosen() !== "tweedie";
  };
  loss.addEventListener("change", () => update());
  return {
    element: h("div", { class: "fields" }, field("Loss", loss, { name: "loss", wide: true, help: properties.loss.description }), power.element),
    read: () => ({ ...(loss.value ? { loss: loss.value } : {}), ...(power.element.hidden ? {} : { power: power.read() }) }),
    loss: chosen,
    update,
  };
}

/** Controls for the named properties of a schema: {element (a grid of fields), read() → object}. */
function settingsGroup(properties, names, prefix = "") {
  const controls = names.map(name => [name, settingControl(name, properties[name], prefix + name)]);
  return {
    element: h("div", { class: "fields" }, controls.map(([, control]) => control.element)),
    read: () => Object.fromEntries(controls.map(([name, control]) => [name, control.read()]).filter(([, value]) => value !== undefined)),
  };
}

function radios(name, label, options, checked) {
  return h("div", { class: "choices", role: "radiogroup", "aria-label": label }, options.map(([value, text]) =>
    h("label", null, h("input", { type: "radio", name, value, checked: value === checked }), text)));
}

const datasetName = dataset => dataset.source.filename ?? dataset.id;
const datasetLabel = dataset => `${datasetName(dataset)} (target ${dataset.target}, ${formatCount(dataset.n_rows)} rows)`;
const sameFeatures = (forest, dataset) => JSON.stringify(forest.feature_names) === JSON.stringify(dataset?.feature_names);
const listed = names => (names.length > 3 ? `${names.slice(0, 3).join(", ")} and ${names.length - 3} more` : names.join(", "));

/** Why `candidate` cannot hold the validation rows of a path on `training`, in words (null: it can): the API's check
 * (app/core/job_submission.py) that it is another table with the training table's columns, in their order, of the
 * same kinds and levels, and its target of the same task and classes. */
function whyNotValidation(candidate, training) {
  if (candidate.id === training.id) return "it is the training dataset";
  const names = dataset => dataset.columns.map(column => column.name);
  const missing = names(training).filter(name => !names(candidate).includes(name));
  const extra = names(candidate).filter(name => !names(training).includes(name));
  if (missing.length || extra.length) {
    return [missing.length ? `it lacks ${listed(missing)}` : null, extra.length ? `it has ${listed(extra)} too` : null]
      .filter(Boolean).join(" and ");
  }
  if (names(candidate).join("\n") !== names(training).join("\n")) return "its columns are in another order";
  const levels = column => `${column.kind}:${JSON.stringify(column.categories ?? [])}`;
  const other = training.columns.find((column, i) => levels(column) !== levels(candidate.columns[i]));
  if (other) return other.kind === "categorical" ? `${other.name} has other text values` : `${other.name} is not numbers there`;
  if (candidate.task !== training.task) return `its target is ${candidate.task}, not ${training.task}`;
  if (JSON.stringify(candidate.classes) !== JSON.stringify(training.classes)) return "its target has other classes";
  return null;
}

async function buildForm(query, navigate) {
  const [request, training, validation, datasets, forests, losses] = await Promise.all([
    schema("PathJobRequest"), schema("TrainingParams"), schema("ValidationSpec"), get("/v1/datasets"), get("/v1/forests"),
    get("/v1/losses")]);
  if (!datasets.length) {
    return h("p", null, "No dataset yet: ", h("a", { href: "/dashboard/datasets" }, "upload one"), " first.");
  }
  const datasetChoices = () => datasets.map(dataset => h("option", { value: dataset.id }, datasetLabel(dataset)));
  const dataset = h("select", { required: true }, datasetChoices());
  dataset.value = datasets.some(d => d.id === query.get("dataset")) ? query.get("dataset") : datasets[0].id;
  const validationDataset = h("select");
  const validationNote = h("span", { class: "help", role: "status" });
  const drawValidationChoices = () => {
    const training = datasets.find(d => d.id === dataset.value);
    const reasons = datasets.map(candidate => whyNotValidation(candidate, training));
    validationDataset.replaceChildren(...datasets.map((candidate, i) => h("option", { value: candidate.id, disabled: reasons[i] !== null },
      datasetLabel(candidate), reasons[i] ? ` — not offered: ${reasons[i]}` : "")));
    const fitting = datasets.filter((_, i) => reasons[i] === null);
    if (fitting.length) validationDataset.value = fitting[0].id;
    const others = datasets.map((candidate, i) => (reasons[i] && candidate.id !== training.id
      ? `${datasetName(candidate)} (${reasons[i]})` : null)).filter(Boolean);
    validationNote.textContent = [
      fitting.length ? null : "No other dataset has the training table's columns and target: upload the validation rows "
        + "as a table with the same columns, or validate on a holdout.",
      others.length ? `Not offered: ${others.join("; ")}.` : null,
    ].filter(Boolean).join(" ");
  };
  drawValidationChoices();
  dataset.addEventListener("change", drawValidationChoices);
  const validationField = field("Validation dataset", validationDataset, { name: "validation.dataset_id", wide: true,
                                                                         help: validation.properties.dataset_id.description });
  validationField.append(validationNote);
  const holdout = settingsGroup(validation.properties, ["fraction", "seed"], "validation.");
  const forestTraining = settingsGroup(training.properties, Object.keys(training.properties), "forest.");
  const storedForest = h("select");
  const drawForestChoices = () => {
    const chosen = datasets.find(d => d.id === dataset.value);
    storedForest.replaceChildren(...forests.map(forest => h("option", { value: forest.id, disabled: !sameFeatures(forest, chosen) },
      `${forest.id.slice(0, 11)}… ${forest.kind}, ${forest.n_trees} trees${sameFeatures(forest, chosen) ? "" : " (other features)"}`)));
    const wanted = forests.find(forest => forest.id === query.get("forest") && sameFeatures(forest, chosen))
      ?? forests.find(forest => sameFeatures(forest, chosen));
    if (wanted) storedForest.value = wanted.id;
  };
  drawForestChoices();
  dataset.addEventListener("change", drawForestChoices);

  const others = Object.keys(request.properties).filter(name => !OWN_CONTROLS.has(name) && !MAIN_SETTINGS.includes(name)
                                                               && !TERM_SETTINGS.includes(name) && !TRUST_SETTINGS.includes(name));
  const loss = lossSettings(request.properties, losses);
  const trust = settingsGroup(request.properties, TRUST_SETTINGS.filter(name => name in request.properties));
  const main = settingsGroup(request.properties, MAIN_SETTINGS.filter(name => name in request.properties));
  const terms = settingsGroup(request.properties, TERM_SETTINGS.filter(name => name in request.properties));
  const solver = settingsGroup(request.properties, others);
  const gridExample = (request.examples ?? []).find(example => example.grid)?.grid ?? {};
  const gridGamma = h("input", { type: "text", inputmode: "decimal", placeholder: (gridExample.gamma ?? []).join(", ") });
  const gridFusion = h("input", { type: "text", inputmode: "decimal", placeholder: (gridExample.fusion_ratio ?? []).join(", ") });
  const gridOn = h("input", { type: "checkbox", id: "grid-on" });

  const validationMode = radios("validation-mode", "Validation rows",
                                [["holdout", "a holdout of the training rows"], ["dataset", "another dataset"]], "holdout");
  const forestMode = radios("forest-mode", "Forest", [["train", "train a forest for this job"], ["stored", "a stored forest"]],
                            query.get("forest") ? "stored" : "train");
  // with folds, every training row validates the step in its fold: the API refuses a holdout or a validation dataset
  // beside cv_folds, so the choice is hidden (and not sent) while folds are set
  const validationRows = h("div", null,
    h("p", { class: "label" }, "Validation rows (they choose the step)"), validationMode,
    h("div", { "data-when": "validation-mode=holdout" }, holdout.element),
    h("div", { "data-when": "validation-mode=dataset", class: "fields" }, validationField));
  const foldsValidate = h("p", { class: "muted", hidden: true },
    "Validation rows: cross-validation folds are set, so every training row validates the step in its fold.");
  const slot = h("div");
  const form = h("form", { "aria-label": "Submit a path job", novalidate: true },
    h("fieldset", null, h("legend", null, "Data"),
      h("div", { class: "fields" }, field("Training dataset", dataset, { name: "dataset_id", wide: true })),
      validationRows, foldsValidate),
    h("fieldset", null, h("legend", null, "Forest"), forestMode,
      h("div", { "data-when": "forest-mode=train" }, forestTraining.element),
      h("div", { "data-when": "forest-mode=stored", class: "fields" },
        field("Stored forest", storedForest, { name: "forest_id", wide: true, help: request.properties.forest_id.description }))),
    h("fieldset", null, h("legend", null, "Loss"), loss.element),
    h("fieldset", null, h("legend", null, "Penalty and rule budget"), main.element),
    h("fieldset", null, h("legend", null, "Candidate terms"), terms.element),
    h("fieldset", null, h("legend", null, "Cross-validation and stability (optional)"),
      h("p", { class: "muted" }, "With folds, every training row validates the step in its fold (the holdout is not used) "
        + "and the chart shows the folds' standard errors; with half-sample fits, each rule shows how often it comes back."),
      trust.element),
    h("fieldset", null, h("legend", null, "Grid (optional)"),
      h("label", null, gridOn, " run one path per γ × fusion ratio cell and keep the best"),
      h("div", { "data-when": "grid-on", class: "fields" },
        field("γ values", gridGamma, { name: "grid.gamma", help: "comma-separated" }),
        field("Fusion ratios", gridFusion, { name: "grid.fusion_ratio", help: request.properties.grid.description }))),
    h("details", null, h("summary", null, "Solver settings"), solver.element),
    h("button", { type: "submit" }, "Submit job"), slot);

  const showChosenParts = () => {
    for (const part of form.querySelectorAll("[data-when]")) {
      const [name, value] = part.dataset.when.split("=");
      const control = value === undefined ? form.elements[name] : form.elements[name].value;
      part.hidden = value === undefined ? !control.checked : control !== value;
    }
  };
  form.addEventListener("change", showChosenParts);
  showChosenParts();
  // a selection is offered where the path can make it: the one-standard-error rule needs the folds' standard errors
  // (offered only while folds are set), and each loss allows its own (GET /v1/losses: AUC a classifier's, the
  // C-index Cox's)
  const folds = form.querySelector("[data-field='cv_folds']");
  const selection = form.querySelector("select[data-field='selection']");
  const offerSelections = () => {
    if (!selection) return;
    for (const option of selection.options) {
      option.disabled = (option.value === "1se" && !folds?.value)
        || !(losses.find(({ name }) => name === loss.loss())?.selections ?? [option.value]).includes(option.value);
    }
    if (selection.selectedOptions[0]?.disabled) {
      selection.value = [...selection.options].find(option => option.defaultSelected && !option.disabled)?.value
        ?? [...selection.options].find(option => !option.disabled).value;
    }
  };
  const showValidationChoice = () => {
    validationRows.hidden = Boolean(folds?.value);
    foldsValidate.hidden = !validationRows.hidden;
  };
  const datasetChanged = () => {
    loss.update(datasets.find(d => d.id === dataset.value)?.task);
    offerSelections();
  };
  folds?.addEventListener("input", offerSelections);
  folds?.addEventListener("input", showValidationChoice);
  form.addEventListener("change", offerSelections);
  dataset.addEventListener("change", datasetChanged);
  datasetChanged();

  onSubmit(form, slot, async () => {
    const body = { dataset_id: dataset.value, ...loss.read(), ...main.read(), ...terms.read(), ...trust.read(), ...solver.read() };
    if (validationRows.hidden) delete body.validation;
    else body.validation = form.elements["validation-mode"].value === "dataset" ? { dataset_id: validationDataset.value } : holdout.read();
    if (form.elements["forest-mode"].value === "train") body.forest = forestTraining.read();
    else body.forest_id = storedForest.value;
    if (gridOn.checked) {
      body.grid = { gamma: parseNumbers(gridGamma.value || gridGamma.placeholder),
                    fusion_ratio: parseNumbers(gridFusion.value || gridFusion.placeholder) };
      delete body.lambda_f;
    }
    const job = await post("/v1/jobs", body);
    navigate(`/dashboard/jobs/${job.id}`);
  });
  return form;
}

export function showSubmitForm(main, { query }, { navigate }) {
  const body = h("div", { class: "card" });
  main.append(pageHeading("Submit a path job"),
    h("p", { class: "muted" }, "Defaults and help come from the API's own request schema."), body);
  fill(body, () => buildForm(query, navigate));
}
