// Where the selected step of a path has no rule (only linear terms, or the intercept alone): the library's sentence
// why (the result's rule_step.reason: solver.path.best_rule_step), with a link to the best step that has a rule.

import { h, link } from "./dom.js";

/** The note of a path result whose selected step has no rule, or null; `stepUrl(k)` is step k's page. */
export function ruleStepNote(result, stepUrl) {
  const choice = result.rule_step;
  if (!choice?.reason) return null;
  return h("p", { id: "rule-step", class: "caution", role: "note" }, choice.reason,
    choice.step === null ? null : [" ", link(stepUrl(choice.step), `Show step ${choice.step}, the best with a rule`), "."]);
}
