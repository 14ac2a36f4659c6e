// baton web: the route graph, drawn as SVG by this script alone (no library, no build step). Nodes are the
// tiles (in their state's colour), a join's node, a model's choice as a diamond; on each edge the route's
// name and what waits there: queued hand-offs, a join's groups, hand-offs awaiting a person. Every label is
// set with textContent. A simple layered layout: a tile no route hands to on the left, each node one
// column right of the first node that hands to it; an edge back to an earlier column curves below.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const G = {col: 210, row: 78, w: 132, h: 46, lane: 34, pad: 20};

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

// each node's column: breadth first from the nodes nothing hands to (or, in a ring, the first one)
function layers(model) {
  const into = new Map(), out = new Map();
  for (const id of model.nodes.keys()) { into.set(id, 0); out.set(id, []); }
  for (const e of model.edges) { into.set(e.to, into.get(e.to) + 1); out.get(e.from).push(e.to); }
  const layer = new Map();
  const walk = (starts) => {
    const queue = starts.filter((id) => !layer.has(id));
    queue.forEach((id) => layer.set(id, 0));
    while (queue.length) {
      const id = queue.shift();
      for (const next of out.get(id)) {
        if (!layer.has(next)) { layer.set(next, layer.get(id) + 1); queue.push(next); }
      }
    }
  };
  walk([...model.nodes.keys()].filter((id) => into.get(id) === 0));
  for (const id of model.nodes.keys()) walk([id]);
  return layer;
}

function place(model) {
  const layer = layers(model);
  const rows = new Map();
  for (const [id, node] of model.nodes) {
    const col = layer.get(id);
    const row = rows.get(col) || 0;
    rows.set(col, row + 1);
    node.x = G.pad + col * G.col;
    node.y = G.pad + row * G.row;
  }
  const width = G.pad * 2 + Math.max(...[...layer.values(), 0]) * G.col + G.w;
  // each edge back to an earlier column curves below the nodes, a lane of its own
  let lanes = 0;
  for (const e of model.edges) {
    if (model.nodes.get(e.to).x <= model.nodes.get(e.from).x) e.lane = lanes++;
  }
  const nodesBottom = G.pad + Math.max(...[...rows.values(), 1]) * G.row;
  return {width: width, height: nodesBottom + lanes * G.lane + G.pad, lanes: nodesBottom};
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

// the edge's path (right side to left side; back to an earlier column: a curve below both) and its middle
function edgePath(a, b, bottom) {
  if (b.x > a.x) {
    const x1 = a.x + G.w, y1 = a.y + G.h / 2, x2 = b.x, y2 = b.y + G.h / 2, dx = (x2 - x1) / 2;
    return {d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`, x: (x1 + x2) / 2, y: (y1 + y2) / 2};
  }
  const x1 = a.x + G.w / 2, x2 = b.x + G.w / 2, y1 = a.y + G.h, y2 = b.y + G.h;
  return {d: `M${x1},${y1} C${x1},${bottom} ${x2},${bottom} ${x2},${y2}`, x: (x1 + x2) / 2, y: bottom - 18};
}

function drawEdge(model, e, lanesTop) {
  const a = model.nodes.get(e.from), b = model.nodes.get(e.to);
  const path = edgePath(a, b, lanesTop + ((e.lane || 0) + 1) * G.lane);
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
  const marker = svgEl("marker", {id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7,
                                  markerHeight: 7, orient: "auto-start-reverse"});
  marker.appendChild(svgEl("path", {d: "M0,0 L10,5 L0,10 z"}));
  defs.appendChild(marker);
  box.replaceChildren(defs, ...model.edges.map((e) => drawEdge(model, e, size.lanes)),
                      ...[...model.nodes.values()].map(drawNode));
  document.getElementById("graph-box").hidden = !routes.length;
}
