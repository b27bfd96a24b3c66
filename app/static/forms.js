// Form fields with their labels and help, and the API's problems shown on the form: the detail and every
// error's fix at the top, and each error next to the input it names.

import { h, problemAlert } from "./dom.js";

let fieldCount = 0;

/**
 * A labelled field. `control` is an input, select or textarea (given an id here when it has none);
 * `name` is the API's name of the value (errors naming `body.<name>` are shown under it); a `wide` field
 * takes a whole row of a grid of fields.
 */
export function field(label, control, { help = null, name = null, wide = false } = {}) {
  control.id ||= `field-${fieldCount += 1}`;
  if (name) control.dataset.field = name;
  const helpText = help ? h("span", { class: "help", id: `${control.id}-help` }, help) : null;
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

/** The control of `form` that an error's field (`body.validation.fraction`, `query.target`) names, if any. */
function controlFor(form, errorField) {
  const parts = errorField.split(".");
  for (let start = 1; start < parts.length; start += 1) {
    const name = parts.slice(start).join(".");
    const control = form.querySelector(`[data-field="${CSS.escape(name)}"]`);
    if (control) return control;
  }
  return null;
}

/** Show `error` in `slot` and mark the inputs its errors name; focus the first of them. */
function reportProblem(form, slot, error) {
  clearProblem(form, slot);
  slot.replaceChildren(problemAlert(error));
  const marked = [];
  for (const fault of error.problem?.errors ?? []) {
    const control = controlFor(form, fault.field ?? "");
    if (!control) continue;
    const message = h("span", { class: "field-error", id: `${control.id}-error` }, fault.message, fault.fix ? ` (${fault.fix})` : "");
    control.after(message);
    control.closest("details")?.setAttribute("open", ""); // a folded input (optional columns) must show its error
    control.setAttribute("aria-invalid", "true");
    control.setAttribute("aria-describedby", [control.getAttribute("aria-describedby"), message.id].filter(Boolean).join(" "));
    marked.push(control);
  }
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
