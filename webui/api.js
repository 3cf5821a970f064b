// Talking to the server: JSON reads, and writes that carry the token when the server wants
// one (asked for once, kept in this browser's storage).
export async function getJson(path) {
  const response = await fetch(path);
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
      const typed = prompt("This server needs its token to change runs:");
      if (!typed) throw new Error(reply.error);
      localStorage.setItem("kiln-token", typed);
      continue;
    }
    if (!response.ok) throw new Error(reply.error || response.statusText);
    return reply;
  }
}

export function liveSocket(run) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return new WebSocket(`${scheme}//${location.host}/api/runs/${encodeURIComponent(run)}/live`);
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
