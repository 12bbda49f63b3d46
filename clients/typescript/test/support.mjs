// What the node tests share: the server they run against (MEMORYUI_URL, MEMORYUI_API_KEY,
// set by tests/test_typescript_client.py) and names that no other test run uses.
import { randomUUID } from "node:crypto";

import { Memoryui, Retries } from "../dist/index.js";

export const URL = process.env.MEMORYUI_URL;
export const KEY = process.env.MEMORYUI_API_KEY;
/** A key with the `admin` scope too (deletions). */
export const ADMIN_KEY = process.env.MEMORYUI_ADMIN_KEY ?? KEY;
if (!URL || !KEY) throw new Error("MEMORYUI_URL and MEMORYUI_API_KEY name the live server and its key");

export const FAST = new Retries({ attempts: 3, backoff: 0.01 });

export const unique = (prefix) => `${prefix}-${randomUUID().slice(0, 8)}`;

export function client(options = {}) {
  return new Memoryui(URL, { apiKey: KEY, retries: FAST, ...options });
}

/** A fetch that passes requests to the server and records them; `dropAnswers` lost after the server answered. */
export function recordingFetch({ dropAnswers = 0, script = [] } = {}) {
  const seen = [];
  let dropped = 0;
  const fetcher = async (url, init) => {
    seen.push({ url: String(url), method: init.method, headers: { ...init.headers }, body: init.body });
    const scripted = script.shift();
    if (scripted) return typeof scripted === "function" ? scripted() : scripted;
    const response = await fetch(url, init);
    if (init.method !== "GET" && dropped < dropAnswers) {
      dropped += 1;
      await response.arrayBuffer();
      throw new TypeError("fetch failed: the answer was lost after the commit");
    }
    return response;
  };
  return { fetch: fetcher, seen };
}

export const jsonAnswer = (status, body, headers = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json", ...headers } });

export async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}
