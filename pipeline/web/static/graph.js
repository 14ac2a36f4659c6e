// baton web: the route graph, drawn as SVG by this script alone (no library, no build step). Nodes are the
// tiles (in their state's colour), a join's node, a model's choice as a diamond; on each edge the route's
// name and what waits there: queued hand-offs, a join's groups, hand-offs awaiting a person. Every label is
// set with textContent. A simple layered layout: a tile no route hands to on the left, each node one
// column right of the last node that hands to it; an edge that closes a loop curves back over the top.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const G = {col: 270, row: 78, w: 132, h: 46, lane: 16, words: 30, pad: 12};

function svgEl(tag, attrs, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

// what waits on an edge to `target` of route `r`, in words ("1 queued", "1 awaiting a person")
function edgeWords(r, target) {
  const words = [];
  const queued = (r.queued || {})[target];
  const awaiting = (r.awaiting || {})[target];
  if (queued) words.push(queued + " queued");
  if (awaiting) words.push(awaiting + " awaiting a person");
  return words.join(" · ");
}

// the graph's nodes and edges from the frame's tiles and routes
function graphModel(tiles, routes) {
  const nodes = new Map();
  const edges = [];
  const tileNode = (name) => {
    const id = "tile:" + name;
    if (!nodes.has(id)) nodes.set(id, {id: id, kind: "tile", label: name, sub: "", state: "gone", tile: name});
    return id;
  };
  for (const t of tiles) {
    const id = tileNode(t.tile);
    Object.assign(nodes.get(id), {sub: t.agent + (t.local ? "" : " @ " + t.host), state: t.kind});
  }
  for (const r of routes) {
    let from = r.sources.map(tileNode);
    if (r.join !== null && r.join !== undefined) {
      const id = "join:" + r.name;
      nodes.set(id, {id: id, kind: "join", label: r.name, sub: "join " + r.join, route: r.name});
      from.forEach((s) => edges.push({from: s, to: id, route: r.name, kind: "into-join", words: ""}));
      from = [id];
    }
    if (r.choose) {
      const id = "choose:" + r.name;
      nodes.set(id, {id: id, kind: "choice", label: r.name, sub: "a model picks", route: r.name});
      from.forEach((s) => edges.push({from: s, to: id, route: r.name, kind: "to-choice", words: ""}));
      from = [id];
    }
    const joining = (r.joining || []).map((g) => "joining " + g).join(" · ");
    for (const s of from) {
      for (const target of r.targets) {
        const words = [joining, edgeWords(r, target)].filter(Boolean).join(" · ");
        edges.push({from: s, to: tileNode(target), route: r.name, target: target, words: words,
                    kind: r.choose ? "chosen" + (target === r.default ? " default" : "") : "handoff",
                    gate: r.gate, held: r.held});
      }
    }
  }
  return {nodes: nodes, edges: edges};
}

// the edges that close a loop (a depth-first walk meets a node still on its path): drawn back, over the top
function backEdges(model) {
  const out = new Map([...model.nodes.keys()].map((id) => [id, []]));
  model.edges.forEach((e) => out.get(e.from).push(e));
  const state = new Map();  // 1: on the walk's path, 2: done
  const back = new Set();
  const walk = (id) => {
    state.set(id, 1);
    for (const e of out.get(id)) {
      if (state.get(e.to) === 1) back.add(e);
      else if (!state.has(e.to)) walk(e.to);
    }
    state.set(id, 2);
  };
  const into = new Set(model.edges.map((e) => e.to));
  [...model.nodes.keys()].filter((id) => !into.has(id)).forEach((id) => { if (!state.has(id)) walk(id); });
  [...model.nodes.keys()].forEach((id) => { if (!state.has(id)) walk(id); });
  return back;
}

// each node's column: the longest chain of forward edges that leads to it
function layers(model, back) {
  const layer = new Map([...model.nodes.keys()].map((id) => [id, 0]));
  const forward = model.edges.filter((e) => !back.has(e));
  for (let moved = true, rounds = 0; moved && rounds <= model.nodes.size; rounds++) {
    moved = false;
    for (const e of forward) {
      if (layer.get(e.to) < layer.get(e.from) + 1) { layer.set(e.to, layer.get(e.from) + 1); moved = true; }
    }
  }
  return layer;
}

// every node's place: its column, and within it the rows in the order of the rows that hand to it (fewer
// crossings); each edge back to an earlier column gets a lane of its own above the nodes
function place(model) {
  const back = backEdges(model);
  const layer = layers(model, back);
  let lanes = 0;
  for (const e of model.edges) {
    if (back.has(e)) e.lane = lanes++;
  }
  const top = G.pad + G.words + lanes * G.lane;
  const columns = [];
  for (const [id, col] of layer) (columns[col] = columns[col] || []).push(id);
  const row = new Map();
  for (const ids of columns.filter(Boolean)) {
    const from = (id) => model.edges.filter((e) => e.to === id && !back.has(e) && row.has(e.from))
      .map((e) => row.get(e.from));
    const rank = (id) => { const r = from(id); return r.length ? r.reduce((x, y) => x + y) / r.length : -1; };
    const ranks = new Map(ids.map((id, i) => [id, [rank(id), i]]));
    ids.sort((a, b) => ranks.get(a)[0] - ranks.get(b)[0] || ranks.get(a)[1] - ranks.get(b)[1]);
    ids.forEach((id, i) => {
      row.set(id, i);
      Object.assign(model.nodes.get(id), {x: G.pad + layer.get(id) * G.col, y: top + i * G.row});
    });
  }
  return {width: G.pad * 2 + (columns.length - 1) * G.col + G.w,
          height: top + Math.max(...columns.filter(Boolean).map((ids) => ids.length), 1) * G.row + G.pad};
}

function drawNode(node) {
  const g = svgEl("g", {class: "node " + node.kind + (node.kind === "tile" ? " " + node.state : ""),
                        transform: "translate(" + node.x + "," + node.y + ")"});
  if (node.tile !== undefined) { g.dataset.tile = node.tile; g.dataset.kind = node.state; }
  if (node.route !== undefined) g.dataset.route = node.route;
  const mid = G.h / 2;
  if (node.kind === "choice") {
    g.appendChild(svgEl("polygon", {points: [[0, mid], [G.w / 2, -6], [G.w, mid], [G.w / 2, G.h + 6]].join(" ")}));
  } else {
    g.appendChild(svgEl("rect", {width: G.w, height: G.h, rx: node.kind === "join" ? G.h / 2 : 6}));
  }
  g.appendChild(svgEl("text", {x: G.w / 2, y: mid - 4, class: "label"}, node.label));
  g.appendChild(svgEl("text", {x: G.w / 2, y: mid + 12, class: "sub"},
                              node.kind === "tile" ? node.sub + (node.sub ? " · " : "") + node.state : node.sub));
  g.appendChild(svgEl("title", {}, node.label + (node.sub ? " (" + node.sub + ")" : "")));
  return g;
}

// the edge's path — forward: right side to left side; back: from the top of one, over the nodes, to the top
// of the other — and where its words go
function edgePath(a, b, lane) {
  if (lane === undefined) {
    const x1 = a.x + G.w, y1 = a.y + G.h / 2, x2 = b.x, y2 = b.y + G.h / 2, dx = (x2 - x1) / 2;
    const d = `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`;
    // past a column of nodes (drawn over it): the words in the first gap, where no node hides them
    if (x2 - x1 > G.col) return {d: d, x: x1 + (G.col - G.w) / 2, y: y1};
    return {d: d, x: (x1 + x2) / 2, y: (y1 + y2) / 2};
  }
  // a cubic whose two control points are at height c peaks at 3/4 c + 1/8 of each end's height
  const x1 = a.x + G.w / 2, x2 = b.x + G.w / 2 + 12, peak = G.pad + G.words + lane * G.lane;
  const c = (peak - (a.y + b.y) / 8) / 0.75;
  return {d: `M${x1},${a.y} C${x1},${c} ${x2},${c} ${x2},${b.y}`, x: (x1 + x2) / 2, y: peak - 18};
}

function drawEdge(model, e) {
  const a = model.nodes.get(e.from), b = model.nodes.get(e.to);
  const path = edgePath(a, b, e.lane);
  const g = svgEl("g", {class: "edge " + e.kind + (e.gate ? " gate" : "") + (e.held ? " held" : "")
                              + (e.words ? " busy" : "")});
  g.dataset.route = e.route;
  g.dataset.from = a.tile !== undefined ? a.tile : a.id;
  g.dataset.to = b.tile !== undefined ? b.tile : b.id;
  g.appendChild(svgEl("path", {d: path.d, "marker-end": "url(#arrow)"}));
  if (e.kind === "handoff" || e.kind === "to-choice") {  // a join's or a choice's node shows its own name
    const name = e.route + (e.gate ? " · gate: " + e.gate : "") + (e.held ? " · held" : "");
    g.appendChild(svgEl("text", {x: path.x, y: path.y - 4, class: "route"}, name));
  }
  g.appendChild(svgEl("text", {x: path.x, y: path.y + 10, class: "count"}, e.words));
  return g;
}

// the whole graph into <svg id="graph">, redrawn from each frame (a frame comes only when something changed)
function drawGraph(tiles, routes) {
  const box = document.getElementById("graph");
  if (!box) return;
  const model = graphModel(tiles, routes);
  const size = place(model);
  box.setAttribute("viewBox", "0 0 " + size.width + " " + size.height);
  box.setAttribute("width", String(size.width));
  box.setAttribute("height", String(size.height));
  const defs = svgEl("defs");
  const marker = svgEl("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9,
                                  markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto"});
  marker.appendChild(svgEl("path", {d: "M0,0 L10,5 L0,10 z"}));
  defs.appendChild(marker);
  box.replaceChildren(defs, ...model.edges.map((e) => drawEdge(model, e)),
                      ...[...model.nodes.values()].map(drawNode));
  document.getElementById("graph-box").hidden = !routes.length;
}
