// The trees a step's rules come from, drawn as trees: each selected leaf (or, for rules from every node, each
// selected internal node) coloured by the sign of its contribution, the internal nodes on its path (its
// antecedents) highlighted, and a node that several selected rules need drawn heavier, so that fused selections
// visibly share antecedents.

import { drawAtWidth } from "./chart.js";
import { formatNumber, h, svg } from "./dom.js";
import { amountText, classLabels, perClass, ruleId } from "./rules.js";

const FULL_TREE_LEAVES = 32; // larger trees show only the branches that lead to selected leaves
const MIN_LEAF_PX = 30; // so do trees whose leaves would be narrower than this
const MIN_LABEL_PX = 34; // a split with less room is drawn as a small square (its words in its tooltip)
const LEVEL = 64, TOP = 22, BOTTOM = 40, SIDE = 8, CHAR = 6.3;

/** Node structure of a fire-forest tree: leaf number (left-to-right depth first) → node id, parents. */
function treeNodes(tree) {
  const leaves = [];
  const parent = new Map();
  const visit = node => {
    if (tree.children_left[node] < 0) { leaves.push(node); return; }
    for (const child of [tree.children_left[node], tree.children_right[node]]) { parent.set(child, node); visit(child); }
  };
  visit(0);
  return { leaves, parent };
}

/** Internal node → how many selected nodes need it (it is on their path); `selected`: node id → choice. */
function pathNeeds({ parent }, selected) {
  const needs = new Map();
  for (const selectedNode of selected.keys()) {
    for (let node = parent.get(selectedNode); node !== undefined; node = parent.get(node)) needs.set(node, (needs.get(node) ?? 0) + 1);
  }
  return needs;
}

/** A tree's selected members (selectedLeaves) by node id: a member names its `node`, or its `leaf` number. */
function selectedNodes({ leaves }, members = []) {
  return new Map(members.map(({ leaf, node, choice }) => [node ?? leaves[leaf], choice]));
}

/**
 * What to draw of one tree: nodes with their depth and horizontal slot, and the edges. With `fold`, a
 * branch without a selected node is drawn as one folded node.
 */
function treeLayout(tree, { leaves }, needs, selected, fold) {
  const isLeaf = node => tree.children_left[node] < 0;
  const leafCount = node => (isLeaf(node) ? 1 : leafCount(tree.children_left[node]) + leafCount(tree.children_right[node]));
  const leafNumber = new Map(leaves.map((node, number) => [node, number]));
  const drawn = [], edges = [];
  let slots = 0;
  const place = (node, depth) => {
    const entry = { node, depth };
    drawn.push(entry);
    if (isLeaf(node)) {
      Object.assign(entry, { kind: "leaf", leaf: leafNumber.get(node), slot: slots++ });
    } else if (fold && !needs.has(node) && !selected.has(node)) {
      Object.assign(entry, { kind: "collapsed", leaves: leafCount(node), slot: slots++ });
    } else {
      const children = [tree.children_left[node], tree.children_right[node]].map(child => place(child, depth + 1));
      children.forEach((child, side) => edges.push({ from: entry, to: child, side }));
      Object.assign(entry, { kind: "split", needs: needs.get(node) ?? 0, slot: (children[0].slot + children[1].slot) / 2 });
    }
    return entry;
  };
  place(0, 0);
  return { drawn, edges, slots, folded: slots < leaves.length, depth: Math.max(...drawn.map(entry => entry.depth)) };
}

const fit = (text, room) => (text.length * CHAR <= room ? text : `${text.slice(0, Math.max(1, Math.floor(room / CHAR) - 1))}…`);

function splitNode(entry, tree, featureNames, choice, x, y, room, labels) {
  const feature = featureNames[tree.feature[entry.node]] ?? `x${tree.feature[entry.node]}`;
  const bound = `≤ ${formatNumber(tree.threshold[entry.node], 4)}`;
  const state = (entry.needs > 1 ? " antecedent shared" : entry.needs ? " antecedent" : "")
    + (choice ? ` selected ${leafTone(choice.contribution)}` : "");
  const missing = tree.missing_go_left[entry.node] ? "left" : "right";
  const title = svg("title", null, `${feature} ≤ ${tree.threshold[entry.node]} (yes: left, no: right; missing goes ${missing})`
                                   + (entry.needs ? `; on the path of ${entry.needs} selected rules` : "")
                                   + (choice ? `; the node itself is rule #${choice.rule} (its conditions are the splits above it), `
                                     + `contribution ${amountText(choice.contribution, labels, { top: Infinity })}` : ""));
  // a selected node's rule: its number left of the box
  const badgeAt = half => (choice ? svg("text", { class: "rule-badge", x: x - half - 3, y: y + 4, "text-anchor": "end" }, `#${choice.rule}`) : null);
  if (room < MIN_LABEL_PX) {
    return svg("g", { class: `node${state}` }, title, svg("rect", { x: x - 5, y: y - 5, width: 10, height: 10, rx: 2 }), badgeAt(5));
  }
  const width = Math.min(room - 6, Math.max(feature.length, bound.length) * CHAR + 10);
  const badge = badgeAt(width / 2);
  return svg("g", { class: `node${state}` }, title,
    svg("rect", { x: x - width / 2, y: y - 15, width, height: 30, rx: 4 }),
    svg("text", { x, y: y - 2, "text-anchor": "middle" }, fit(feature, width - 6)),
    svg("text", { class: "threshold", x, y: y + 11, "text-anchor": "middle" }, fit(bound, width - 6)), badge);
}

/** A selected leaf's colour: the sign of its contribution; per class (K classes), neutral. */
const leafTone = contribution => (perClass(contribution) ? "per-class" : contribution >= 0 ? "up" : "down");

function leafNode(entry, tree, choice, x, y, room, labels) {
  const value = tree.value[entry.node];
  const label = choice ? `#${choice.rule}` : null;
  const amount = choice ? amountText(choice.contribution, labels, { digits: 3, top: 1 }).replace(/ \(\d+ more\)$/, "") : null;
  return svg("g", { class: `leaf${choice ? ` selected ${leafTone(choice.contribution)}` : ""}` },
    svg("title", null, `leaf ${entry.leaf}: value ${Array.isArray(value) ? value.map(v => formatNumber(v, 4)).join(", ") : value}`
                       + (choice ? `; rule #${choice.rule}, contribution ${amountText(choice.contribution, labels, { top: Infinity })}` : "")),
    svg("circle", { cx: x, cy: y, r: choice ? 7 : 4.5 }),
    label && room > 18 ? svg("text", { x, y: y + 19, "text-anchor": "middle" }, label) : null,
    choice && room > 44 ? svg("text", { x, y: y + 31, "text-anchor": "middle" }, amount) : null);
}

function collapsedNode(entry, x, y) {
  return svg("g", { class: "collapsed" },
    svg("title", null, `a branch of ${entry.leaves} leaves, none selected`),
    svg("path", { d: `M${x},${y - 8} L${x + 9},${y + 8} L${x - 9},${y + 8} Z` }),
    svg("text", { class: "edge-label", x, y: y + 21, "text-anchor": "middle" }, entry.leaves));
}

/** Horizontal room of each drawn node in slots: the distance to its nearest neighbour on its level. */
function slotRoom(drawn) {
  const room = new Map();
  const levels = Map.groupBy(drawn, entry => entry.depth);
  for (const level of levels.values()) {
    level.sort((a, b) => a.slot - b.slot).forEach((entry, i) => {
      room.set(entry, Math.min(level[i + 1] ? level[i + 1].slot - entry.slot : Infinity,
                               i ? entry.slot - level[i - 1].slot : Infinity));
    });
  }
  return room;
}

function drawTree(container, width, tree, featureNames, selected, layout, labels) {
  const height = TOP + layout.depth * LEVEL + BOTTOM;
  const slot = (width - 2 * SIDE) / layout.slots; // px per leaf slot
  const rooms = slotRoom(layout.drawn);
  const roomAt = entry => Math.min(rooms.get(entry) * slot, width - 2 * SIDE, 160);
  const x = entry => SIDE + (entry.slot + 0.5) * slot;
  const y = entry => TOP + entry.depth * LEVEL;
  container.replaceChildren(svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "tree", "aria-hidden": "true" },
    layout.edges.map(({ from, to, side }) => svg("g", null,
      svg("path", { class: `edge${selected.has(to.node) || to.needs ? " on-path" : ""}`,
                    d: `M${x(from)},${y(from) + 15} C${x(from)},${y(from) + 40} ${x(to)},${y(to) - 40} ${x(to)},${y(to) - 15}` }),
      roomAt(to) > 40 ? svg("text", { class: "edge-label", x: (x(from) + x(to)) / 2 + (side ? 10 : -10),
        y: (y(from) + y(to)) / 2 + 4, "text-anchor": side ? "start" : "end" }, side ? "no" : "yes") : null)),
    layout.drawn.map(entry => entry.kind === "split"
      ? splitNode(entry, tree, featureNames, selected.get(entry.node), x(entry), y(entry), roomAt(entry), labels)
      : entry.kind === "leaf" ? leafNode(entry, tree, selected.get(entry.node), x(entry), y(entry), roomAt(entry), labels)
        : collapsedNode(entry, x(entry), y(entry)))));
}

/** Selected leaves and nodes per tree of a rule ensemble: tree → [{leaf, node, choice: {rule, contribution of that
 * member}}] (a member names its leaf number, or its node id for rules from every node); a K-class ensemble's
 * contributions are per class (weight K numbers × the member's value). `labels` holds its classes. */
export function selectedLeaves(ensemble) {
  const byTree = new Map();
  const times = (weight, value) => (perClass(weight) ? weight.map(w => w * value) : weight * value);
  ensemble.rules.forEach((rule, position) => {
    for (const member of rule.members) {
      if (!byTree.has(member.tree)) byTree.set(member.tree, []);
      byTree.get(member.tree).push({ leaf: member.leaf, node: member.node,
                                     choice: { rule: ruleId(rule, position), contribution: times(member.weight, member.value) } });
    }
  });
  byTree.labels = classLabels(ensemble);
  return byTree;
}

/**
 * One figure per tree of `forestTrees` (a /v1/forests/{id}/trees answer), its selected leaves from
 * `leavesByTree` (selectedLeaves). Each figure has the id `tree-{t}` and a caption in words. With `fold`,
 * a large tree shows only the branches that lead to selected leaves.
 */
export function treeFigures(forestTrees, leavesByTree, { fold = true } = {}) {
  const { forest, tree_indices: indices } = forestTrees;
  return indices.map((t, i) => {
    const tree = forest.trees[i];
    const nodes = treeNodes(tree);
    const selected = selectedNodes(nodes, leavesByTree.get(t));
    const needs = pathNeeds(nodes, selected);
    const shared = [...needs.values()].filter(count => count > 1).length;
    const rules = [...new Set([...selected.values()].map(choice => `#${choice.rule}`))];
    const foldNote = h("span", { class: "muted" });
    const canvas = h("div");
    const caption = h("figcaption", null, h("strong", null, `Tree ${t}`),
      selected.size ? `: ${rules.length} ${rules.length === 1 ? "rule" : "rules"} (${rules.join(", ")}), ${needs.size} antecedents`
        + (shared ? `, ${shared} shared by several rules` : "")
        : `: ${nodes.leaves.length} leaves`,
      foldNote);
    drawAtWidth(canvas, () => {
      const width = Math.max(240, canvas.clientWidth);
      const crowded = nodes.leaves.length > FULL_TREE_LEAVES || (width - 2 * SIDE) / nodes.leaves.length < MIN_LEAF_PX;
      const layout = treeLayout(tree, nodes, needs, selected, fold && crowded);
      foldNote.textContent = layout.folded ? " · branches without a selected rule folded" : "";
      drawTree(canvas, width, tree, forest.feature_names, selected, layout, leavesByTree.labels);
    });
    return h("figure", { class: "tree-figure", id: `tree-${t}`, tabindex: "-1" }, caption, canvas);
  });
}
