// Talking to the server. A server with a token wants it for every read as for every change
// (docs/security.md): the token is asked for once and kept in this browser's storage; reads
// and the live feed go with the session cookie the server sets when the page posts the token
// to /api/session (a browser cannot put a header on a WebSocket), and changes carry the
// token itself as their Authorization header.

let signingIn = null;  // the sign-in under way, which every request that was refused waits for

// Trades the kept token, or one asked for, for the session cookie; a refused token is
// forgotten and asked for again, until the user cancels.
async function startSession() {
  let token = localStorage.getItem("kiln-token");
  let question = "This server needs its token:";
  for (;;) {
    if (!token) {
      token = (prompt(question) || "").trim();
      if (!token) throw new Error("this server needs its token; reload the page to give it");
    }
    const response = await fetch("/api/session", {
      method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + token }, body: "{}",
    });
    if (response.ok) {
      localStorage.setItem("kiln-token", token);
      return;
    }
    const reply = await response.json();
    if (response.status !== 401) throw new Error(reply.error || response.statusText);
    localStorage.removeItem("kiln-token");
    token = null;
    question = "The server refused that token. Its token:";
  }
}

// Signs in once for all the requests refused at the same time. `refused`: the token a
// change was refused with, which is not tried again.
function signIn(refused = null) {
  if (refused && localStorage.getItem("kiln-token") === refused) localStorage.removeItem("kiln-token");
  signingIn ||= startSession().finally(() => { signingIn = null; });
  return signingIn;
}

export async function getJson(path) {
  let response = await fetch(path);
  if (response.status === 401) {
    await signIn();
    response = await fetch(path);
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

export async function send(method, path, body) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const headers = { "Content-Type": "application/json" };
    const token = localStorage.getItem("kiln-token");
    if (token) headers.Authorization = "Bearer " + token;
    const response = await fetch(path, { method, headers, body: JSON.stringify(body) });
    const reply = await response.json();
    if (response.status === 401 && attempt === 0) {
      await signIn(token);
      continue;
    }
    if (!response.ok) throw new Error(reply.error || response.statusText);
    return reply;
  }
}

// The run's live feed; the browser sends the session cookie with the upgrade.
export function liveSocket(run) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return new WebSocket(`${scheme}//${location.host}/api/runs/${encodeURIComponent(run)}/live`);
}

// Beside the store it serves, a server may show other stores read-only (docs/dashboard.md#several-stores):
// their runs' and sweeps' ids are "LABEL:ID" strings, and the first store's plain numbers.
// What a link names a run or a sweep by: its name, after "LABEL:" when it is another store's.
export function storePrefix(id) {
  return typeof id === "string" ? id.slice(0, id.indexOf(":") + 1) : "";
}
export function address(item) {
  return storePrefix(item.id) + item.name;
}

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  node.append(...children.filter((c) => c !== undefined && c !== null));
  return node;
}

export const format = {
  loss: (x) => (x == null ? "—" : x.toFixed(4)),
  rate: (x) => (x == null ? "—" : x >= 1e6 ? (x / 1e6).toFixed(2) + "M" : x >= 1e3 ? (x / 1e3).toFixed(1) + "k" : x.toFixed(0)),
  percent: (x) => (x == null ? "—" : (100 * x).toFixed(1) + "%"),
  time: (t) => (t == null ? "—" : new Date(t * 1000).toLocaleString()),
  // Local time to the minute, as narrow columns show it: 2026-11-23 08:51.
  minute: (t) => {
    if (t == null) return "—";
    const d = new Date(t * 1000), two = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
  },
  // Bytes in binary units as kiln prints them (store/human_format.h): 63.1 MiB.
  bytes: (b) => {
    if (b == null) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let v = b, u = 0;
    while (v >= 1024 && u + 1 < units.length) { v /= 1024; u++; }
    return u === 0 ? `${b} B` : `${v.toFixed(1)} ${units[u]}`;
  },
  duration: (s) => {
    if (s == null) return "—";
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = Math.floor(s % 60);
    return h ? `${h}h${String(m).padStart(2, "0")}m` : m ? `${m}m${String(r).padStart(2, "0")}s` : `${r}s`;
  },
};
