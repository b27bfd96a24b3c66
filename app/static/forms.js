// Form fields with their labels and help, and the API's problems shown on the form: the detail and every
// error's fix at the top, and each error next to the input it names.

import { h, problemAlert } from "./dom.js";

let fieldCount = 0;

// help drawn from the API's descriptions, which speak to programs, said in words: None (null) is a setting not set
const PROGRAM_WORDS = [[/\b(None|null)\b/g, "not set"], [/\bTrue\b/g, "on"], [/\bFalse\b/g, "off"], [/\ba 422\b/g, "refused"]];
const inWords = text => PROGRAM_WORDS.reduce((words, [pattern, replacement]) => words.replace(pattern, replacement), text);

/**
 * A labelled field. `control` is an input, select or textarea (given an id here when it has none);
 * `name` is the API's name of the value (errors naming `body.<name>` are shown under it); a `wide` field
 * takes a whole row of a grid of fields.
 */
export function field(label, control, { help = null, name = null, wide = false } = {}) {
  control.id ||= `field-${fieldCount += 1}`;
  if (name) control.dataset.field = name;
  const helpText = help ? h("span", { class: "help", id: `${control.id}-help` }, inWords(help)) : null;
  if (helpText) control.setAttribute("aria-describedby", helpText.id);
  return h("div", { class: wide ? "field wide" : "field" }, h("label", { for: control.id }, label), control, helpText);
}

function clearProblem(form, slot) {
  slot.replaceChildren();
  for (const message of form.querySelectorAll(".field-error")) message.remove();
  for (const control of form.querySelectorAll("[aria-invalid]")) {
    control.removeAttribute("aria-invalid");
    const described = (control.getAttribute("aria-describedby") ?? "").split(" ").filter(id => !id.endsWith("-error"));
    if (described.length) control.setAttribute("aria-describedby", described.join(" "));
    else control.removeAttribute("aria-describedby");
  }
}

/** The control of `form` that an error's field (`body.validation.fraction`, `query.target`) names, if any: the
 * field itself, else the nearest field it is part of (`body.lambdas.2` → lambdas); none where it is hidden. */
function controlFor(form, errorField) {
  const parts = errorField.split(".").slice(1);
  for (let end = parts.length; end > 0; end -= 1) {
    const control = form.querySelector(`[data-field="${CSS.escape(parts.slice(0, end).join("."))}"]`);
    if (control) return control.closest("[hidden]") ? null : control;
  }
  return null;
}

/** Show each of the problem's faults at the input it names and the others, with its detail, in `slot`; focus the
 * first input at fault. */
function reportProblem(form, slot, error) {
  clearProblem(form, slot);
  const marked = [], unplaced = [];
  for (const fault of error.problem?.errors ?? []) {
    const control = controlFor(form, fault.field ?? "");
    if (!control || control.getAttribute("aria-invalid")) {
      unplaced.push(fault);
      continue;
    }
    const message = h("span", { class: "field-error", id: `${control.id}-error` }, fault.message, fault.fix ? ` (${fault.fix})` : "");
    control.after(message);
    control.closest("details")?.setAttribute("open", ""); // a folded input (optional columns) must show its error
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-describedby", [control.getAttribute("aria-describedby"), message.id].filter(Boolean).join(" "));
    marked.push(control);
  }
  slot.replaceChildren(problemAlert(error, { faults: unplaced, placed: marked.length }));
  (marked[0] ?? slot.firstChild)?.focus?.();
}

/** Run `action()` on submit with the button disabled, showing its problem on the form if it fails. */
export function onSubmit(form, slot, action) {
  form.addEventListener("submit", async event => {
    event.preventDefault();
    const buttons = form.querySelectorAll("button[type=submit]");
    buttons.forEach(button => { button.disabled = true; });
    clearProblem(form, slot);
    try {
      await action();
    } catch (error) {
      reportProblem(form, slot, error);
    } finally {
      buttons.forEach(button => { button.disabled = false; });
    }
  });
}
