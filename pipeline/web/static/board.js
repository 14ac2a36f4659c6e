// baton web: the live board. Frames come from the server's one event stream; every piece of text from an
// agent goes into the page with textContent (never innerHTML), so an answer holding HTML shows as written.
"use strict";

const token = new URLSearchParams(location.search).get("token") || "";
const $ = (id) => document.getElementById(id);
const cards = new Map();
let offset = 0;  // the server's clock minus this page's, in seconds
let frame = null;

function ago(seconds) {
  const s = Math.max(Math.floor(seconds), 0);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
  if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s % 3600 / 60)).padStart(2, "0") + "m";
  return Math.floor(s / 86400) + "d";
}

function now() { return Date.now() / 1000 + offset; }

function stateText(t) {
  if (t.kind === "working") return "working " + ago(now() - t.since) + (t.words ? ": " + t.words : "");
  if (t.kind === "waiting" || t.kind === "absent") return t.kind + ": " + t.words;
  return t.kind + (t.words ? ": " + t.words : "");
}

// a hand-off's state in the words the tile and the list share (a refused send: nothing was typed)
function handoffWord(h) {
  if (h.refused) return "refused";
  return {pending: "queued", transformed: "queued", delivering: "typing", awaiting: "awaiting you"}[h.state] || h.state;
}

function handoffText(t) {
  const h = t.last;
  if (!h) return "";
  const where = h.source === t.tile ? "→" + h.target : "←" + h.source;
  return where + " " + handoffWord(h) + " " + ago(now() - h.updated) + " ago";
}

const LABELS = {approve: "Approve", deny: "Deny", send: "Send", retry: "Retry", hold: "Hold", resume: "Resume",
                pass: "Pass", drop: "Drop"};
const NOTICE_MS = {ok: 6000, fail: 15000};
const notices = new Map();  // where a button was pressed (data-place) -> {ok, text}
let toastTimer = 0;

// an element's notice, if its place has one: where the button was pressed (and the list redrawn since)
function showNotice(el) {
  const notice = notices.get(el.dataset.place);
  let said = el.querySelector(":scope > .said");
  if (!notice) { if (said) said.hidden = true; return; }
  if (!said) {
    said = document.createElement("p");
    said.className = "said";
    el.appendChild(said);
  }
  said.textContent = notice.text;
  said.className = "said " + (notice.ok ? "ok" : "fail");
  said.hidden = false;
}

// an action's outcome: next to its button, and as a notice at the foot of the screen, both for a while
function say(ok, message, place) {
  const out = $("outcome");
  out.textContent = message;
  out.className = ok ? "ok" : "fail";
  out.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { out.hidden = true; }, ok ? NOTICE_MS.ok : NOTICE_MS.fail);
  if (!place) return;
  const notice = {ok: ok, text: message};
  notices.set(place, notice);
  setTimeout(() => {
    if (notices.get(place) !== notice) return;
    notices.delete(place);
    document.querySelectorAll("[data-place]").forEach((el) => { if (el.dataset.place === place) showNotice(el); });
  }, ok ? NOTICE_MS.ok : NOTICE_MS.fail);
  document.querySelectorAll("[data-place]").forEach((el) => { if (el.dataset.place === place) showNotice(el); });
}

async function act(kind, target, text, button) {
  const place = button ? (button.closest("[data-place]") || {dataset: {}}).dataset.place : "";
  const label = LABELS[kind] + " " + target + ": ";
  if (button) button.disabled = true;
  try {
    const response = await fetch("/api/action", {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-Baton-Token": token},
      body: JSON.stringify({kind: kind, target: target, text: text}),
    });
    let answer = {ok: false, message: response.status + " " + response.statusText};
    try { answer = await response.json(); } catch (e) { /* not JSON: the status says it */ }
    say(answer.ok, label + answer.message, place);
    return answer.ok;
  } catch (e) {
    say(false, label + e, place);
    return false;
  } finally {
    if (button) button.disabled = false;
  }
}

function card(name) {
  let el = cards.get(name);
  if (el) return el;
  el = $("tile-card").content.firstElementChild.cloneNode(true);
  el.dataset.tile = name;
  el.dataset.place = "tile:" + name;
  const form = el.querySelector(".send");
  const opener = el.querySelector(".open-send");
  const fold = (open) => {
    form.hidden = !open;
    opener.setAttribute("aria-expanded", String(open));
    if (open) form.elements.text.focus();
  };
  opener.addEventListener("click", () => fold(form.hidden));
  el.querySelector(".approve").addEventListener("click", (e) => act("approve", name, null, e.target));
  el.querySelector(".deny").addEventListener("click", (e) => act("deny", name, null, e.target));
  el.querySelector(".send").addEventListener("submit", async (e) => {
    e.preventDefault();
    const input = e.target.elements.text;
    if (!input.value.trim()) return;
    if (await act("send", name, input.value, e.target.querySelector("button"))) {
      input.value = "";
      fold(false);
    }
  });
  cards.set(name, el);
  return el;
}

function fillTile(el, t) {
  el.dataset.kind = t.kind;
  el.querySelector(".name").textContent = t.tile;
  el.querySelector(".agent").textContent = t.agent;
  el.querySelector(".host").textContent = t.local ? "" : "on " + t.host;
  el.querySelector(".state").textContent = stateText(t);
  const answer = el.querySelector(".answer");
  answer.textContent = t.answer || "(no answer yet)";
  answer.classList.toggle("none", !t.answer);
  el.querySelector(".handoff").textContent = handoffText(t);
  el.querySelector(".queued").textContent = t.queued ? t.queued + " queued" : "";
  // the join groups that will hand on to this tile, still joining: "verdicts: 1 of 2 (security)"
  el.querySelector(".joining").textContent = (t.joining || []).map((g) => "joining " + g).join(" · ");
  el.querySelector(".usage").textContent = t.tokens ? t.tokens + " tokens" + (t.cost ? " · " + t.cost : "") : "";
  el.querySelector(".ask").hidden = t.kind !== "waiting";
  el.querySelector(".asks").textContent = t.waiting_for || "";
  showNotice(el);
}

function renderTiles(tiles) {
  const box = $("tiles");
  const seen = new Set();
  tiles.forEach((t, i) => {
    const el = card(t.tile);
    seen.add(t.tile);
    fillTile(el, t);
    if (box.children[i] !== el) box.insertBefore(el, box.children[i] || null);
  });
  for (const [name, el] of cards) {
    if (!seen.has(name)) { el.remove(); cards.delete(name); }
  }
}

function item(parts, buttons) {
  const li = document.createElement("li");
  for (const [cls, text] of parts) {
    const span = document.createElement("span");
    span.className = cls;
    span.textContent = text;
    li.appendChild(span);
  }
  if (!buttons.length) return li;
  const group = document.createElement("span");
  group.className = "buttons";
  for (const [label, onClick] of buttons) {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", (e) => onClick(e.target));
    group.appendChild(b);
  }
  li.appendChild(group);
  return li;
}

function renderRoutes(routes) {
  $("routes").replaceChildren(...routes.map((r) => {
    const li = item([["what", r.name + (r.name === r.from + "->" + r.to ? "" : " (" + r.from + " → " + r.to + ")")],
                     ["st", r.held ? "held" : ""]],
      [r.held ? ["Resume", (b) => act("resume", r.name, null, b)] : ["Hold", (b) => act("hold", r.name, null, b)]]);
    li.dataset.route = r.name;
    li.dataset.held = String(r.held);
    li.dataset.place = "route:" + r.name;
    showNotice(li);
    return li;
  }));
}

// each hand-off awaiting a person (a route's gate: person), its whole prompt in a box to edit, Pass and Drop.
// A card is made once per hand-off and kept while it awaits: a new frame never overwrites what is being
// typed. Pass sends the box's text only when it was edited (else the route's own prompt goes).
const gated = new Map();

function gatedCard(a) {
  let li = gated.get(a.key);
  if (li) return li;
  li = $("awaiting-card").content.firstElementChild.cloneNode(true);
  li.dataset.key = a.key;
  li.dataset.place = "awaiting:" + a.key;
  const box = li.querySelector("textarea");
  if (a.prompt === null) {  // another host's: its prompt stays there; Pass and Drop go to it over the bus
    li.querySelector(".edit").replaceChildren(Object.assign(document.createElement("span"),
      {className: "hint", textContent: "the prompt is on host " + a.host + ": Pass types it as it is"}));
  }
  box.value = a.prompt || "";
  box.addEventListener("input", () => { li.dataset.edited = "true"; });
  li.querySelector(".pass").addEventListener("click", (e) =>
    act("pass", a.key, li.dataset.edited === "true" ? box.value : null, e.target));
  li.querySelector(".drop").addEventListener("click", (e) => act("drop", a.key, null, e.target));
  gated.set(a.key, li);
  return li;
}

function awaitingWhen(a) {
  const waited = "waiting " + ago(now() - a.created);
  return a.expires ? waited + " · expires in " + ago(a.expires - now()) : waited;
}

function renderAwaiting(awaiting) {
  const list = $("awaiting");
  const seen = new Set();
  awaiting.forEach((a, i) => {
    const li = gatedCard(a);
    seen.add(a.key);
    li.querySelector(".what").textContent = a.route + ": " + a.source + " → " + a.target + " (" + a.key + ")";
    li.dataset.created = String(a.created);
    li.dataset.expires = a.expires ? String(a.expires) : "";
    li.querySelector(".when").textContent = awaitingWhen(a);
    showNotice(li);
    if (list.children[i] !== li) list.insertBefore(li, list.children[i] || null);
  });
  for (const [key, li] of gated) {
    if (!seen.has(key)) { li.remove(); gated.delete(key); }
  }
  $("awaiting-box").hidden = !awaiting.length;
}

// a failed hand-off can be retried; a refused send (nothing typed) is an outcome already said, not one
function retryable(h) { return h.state === "failed" && !h.refused; }

function renderRecent(recent) {
  $("recent").replaceChildren(...recent.map((h) => {
    const li = item([["when", ago(now() - h.updated) + " ago"], ["what", h.source + " → " + h.target],
                     ["st", handoffWord(h)], ["prompt", h.prompt || ""], ["why", h.why]],
      retryable(h) ? [["Retry", (b) => act("retry", h.key, null, b)]] : []);
    li.dataset.state = h.state;
    li.dataset.word = handoffWord(h);
    li.dataset.key = h.key;
    li.dataset.updated = String(h.updated);
    li.dataset.place = "handoff:" + h.key;
    showNotice(li);
    return li;
  }));
  if (!recent.length) $("recent").replaceChildren(item([["when", "no hand-offs yet"]], []));
}

// "1 waiting · 1 failed · 2 working", and the count of waiting tiles in the tab's title
function renderSummary(f) {
  const count = (kind) => f.tiles.filter((t) => t.kind === kind).length;
  const awaiting = (f.awaiting || []).length;
  const parts = [["awaiting", awaiting], ["waiting", count("waiting")],
                 ["failed", f.recent.filter(retryable).length], ["working", count("working")], ["idle", count("idle")], ["absent", count("absent")],
                 ["gone", count("gone")]].filter(([, n]) => n);
  $("summary").replaceChildren(...parts.map(([word, n], i) => {
    const span = document.createElement("span");
    span.className = word;
    span.textContent = (i ? " · " : "") + n + " " + word;
    return span;
  }));
  const waiting = count("waiting") + awaiting;
  document.title = (waiting ? "(" + waiting + ") " : "") + "batonpass";
}

function render() {
  if (!frame) return;
  $("title").textContent = frame.title + " · " + frame.tiles.length + " tile" + (frame.tiles.length === 1 ? "" : "s")
    + " · " + frame.host;
  renderTiles(frame.tiles);
  $("note").textContent = frame.note || "";
  $("note").hidden = !frame.note;
}

let frameAt = null;  // when the last frame came (this page's clock): what the page shows "as of"

function hhmmss(d) { return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":"); }

function connect() {
  const events = new EventSource("/api/events?token=" + encodeURIComponent(token));
  events.addEventListener("board", (e) => {
    frame = JSON.parse(e.data);
    frameAt = new Date();
    offset = frame.sent - Date.now() / 1000;
    render();
    renderRoutes(frame.routes);
    drawGraph(frame.tiles, frame.routes);
    renderRecent(frame.recent);
    renderAwaiting(frame.awaiting || []);
    renderSummary(frame);
    document.body.dataset.frames = String(Number(document.body.dataset.frames || 0) + 1);
  });
  events.addEventListener("open", () => {
    $("link").textContent = "live";
    $("link").className = "link up";
    document.body.classList.remove("stale");
  });
  events.addEventListener("error", () => {
    // the server stopped (or the network): what the page shows is as it was then, greyed
    $("link").textContent = "reconnecting" + (frameAt ? " · as of " + hhmmss(frameAt) : "…");
    $("link").className = "link down";
    document.body.classList.add("stale");
  });
}

// the clocks tick here (working 2m10s, 5s ago): the server sends a frame only when something changed;
// with the server gone they stop, as of the last frame
setInterval(() => {
  if (document.body.classList.contains("stale")) return;
  render();
  for (const li of $("recent").querySelectorAll("li[data-updated]")) {
    li.querySelector(".when").textContent = ago(now() - Number(li.dataset.updated)) + " ago";
  }
  for (const li of $("awaiting").querySelectorAll("li[data-created]")) {
    li.querySelector(".when").textContent = awaitingWhen({created: Number(li.dataset.created),
                                                           expires: Number(li.dataset.expires) || null});
  }
}, 1000);
connect();
