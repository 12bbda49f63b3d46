/**
 * What every operation shares: the retry policy, the JSON encoding checked before
 * anything is sent, and `send`, which tries one request until it is answered.
 *
 * A write carries one Idempotency-Key, made once per call and reused by each of its
 * retries, so the server applies it once however often it was sent. Retries happen on
 * connection errors, on 429, 502, 503, 504, and on a 409 carrying Retry-After (an import
 * of the same source in progress), never on another 4xx.
 */

import { errorFromResponse, TransportError, Unencodable } from "./errors.js";

export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
export const IDEMPOTENCY_HEADER = "Idempotency-Key";

export interface RetryOptions {
  /** Tries in all (the first included). Default 5. */
  attempts?: number;
  /** Seconds before the second try; doubled each try, with jitter. Default 0.25. */
  backoff?: number;
  /** The most a computed wait can be, in seconds. Default 8. */
  maxBackoff?: number;
  /** The most a server's Retry-After is obeyed, in seconds. Default 60. */
  maxRetryAfter?: number;
  /** No retry is made whose wait would take the call's waiting past this many seconds. Default 120. */
  deadline?: number;
}

export class Retries {
  readonly attempts: number;
  readonly backoff: number;
  readonly maxBackoff: number;
  readonly maxRetryAfter: number;
  readonly deadline: number;

  constructor(options: RetryOptions = {}) {
    this.attempts = options.attempts ?? 5;
    this.backoff = options.backoff ?? 0.25;
    this.maxBackoff = options.maxBackoff ?? 8;
    this.maxRetryAfter = options.maxRetryAfter ?? 60;
    this.deadline = options.deadline ?? 120;
  }

  /** Seconds to wait before try `attempt + 1`: the server's Retry-After, else jittered backoff. */
  delay(attempt: number, retryAfter: string | null = null): number {
    const told = parseRetryAfter(retryAfter);
    if (told !== null) return Math.min(told, this.maxRetryAfter);
    const base = Math.min(this.maxBackoff, this.backoff * 2 ** (attempt - 1));
    return base * (0.5 + Math.random() / 2);
  }

  /** Seconds to wait before trying an answered request again; null: do not retry it. */
  waitBeforeRetry(attempt: number, status: number, retryAfter: string | null, waited: number): number | null {
    if (attempt >= this.attempts || !retryable(status, retryAfter)) return null;
    const wait = this.delay(attempt, retryAfter);
    return waited + wait <= this.deadline ? wait : null;
  }
}

export function retryable(status: number, retryAfter: string | null): boolean {
  return RETRY_STATUSES.has(status) || (status === 409 && parseRetryAfter(retryAfter) !== null);
}

/** Seconds from a Retry-After header: a number of seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | null | undefined): number | null {
  if (!value || !value.trim()) return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.max(0, Number(text));
  const when = Date.parse(text);
  return Number.isNaN(when) ? null : Math.max(0, (when - Date.now()) / 1000);
}

export function newIdempotencyKey(): string {
  return `mui-${globalThis.crypto.randomUUID()}`;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * A request body as JSON text, or `Unencodable` naming the first value that has no JSON
 * form, before anything is sent (JSON.stringify would silently drop `undefined` and
 * functions, write NaN as null and send a lone surrogate the server cannot decode).
 * `undefined` as an object's value is left out, as JSON.stringify does: that is how
 * optional fields are written in TypeScript.
 */
export function encodeJson(value: unknown, where = ""): string {
  const problem = firstUnencodable(value, where, new Set());
  if (problem) {
    const [field, what] = problem;
    throw new Unencodable(`${field || "the body"} ${what}; nothing was sent`,
      { code: "unencodable", field: field || null });
  }
  return JSON.stringify(value);
}

function firstUnencodable(value: unknown, where: string, seen: Set<object>): [string, string] | null {
  switch (typeof value) {
    case "string":
      return LONE_SURROGATE.test(value) ? [where, "holds an unpaired surrogate, which is not valid Unicode"] : null;
    case "boolean":
      return null;
    case "number":
      return Number.isFinite(value) ? null : [where, `is ${value}, which JSON has no form for`];
    case "object":
      break;
    default:
      return [where, `is a ${typeof value}, which is not JSON`];
  }
  if (value === null) return null;
  const object = value as object;
  if (typeof (object as { toJSON?: unknown }).toJSON === "function") {
    return firstUnencodable((object as { toJSON(): unknown }).toJSON(), where, seen);
  }
  if (seen.has(object)) return [where, "contains itself"];
  const isArray = Array.isArray(object);
  if (!isArray && Object.getPrototypeOf(object) !== Object.prototype && Object.getPrototypeOf(object) !== null) {
    return [where, `is a ${object.constructor?.name ?? "object"}, which is not JSON`];
  }
  seen.add(object);
  for (const [key, item] of Object.entries(object)) {
    const path = where ? `${where}.${key}` : key;
    if (LONE_SURROGATE.test(key)) return [path, "has a key that holds an unpaired surrogate, which is not valid Unicode"];
    if (item === undefined && !isArray) continue;
    const found = firstUnencodable(item, path, seen);
    if (found) return found;
  }
  seen.delete(object);
  return null;
}

export type Query = Record<string, string | number | boolean | null | undefined>;

/** A file's bytes as a request body: a Blob (Node's `openAsBlob(path)` reads from disk as it is
 * sent, and again on a retry), bytes, or its text. */
export type RawBody = Blob | Uint8Array | ArrayBuffer | string;

/** One request of the API: what to send, and whether it writes (then it carries an Idempotency-Key). */
export interface Call {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Query;
  body?: unknown;
  /** A file sent as the body itself, instead of JSON `body`. */
  raw?: { data: RawBody; contentType: string };
  idempotencyKey?: string | null;
}

/** A write: its Idempotency-Key is the caller's, or a new one, kept for all its tries. */
export function write(method: Call["method"], path: string, body: unknown, idempotencyKey?: string | null,
                      query?: Query): Call {
  return { method, path, body, query, idempotencyKey: idempotencyKey || newIdempotencyKey() };
}

export interface Transport {
  baseUrl: string;
  headers: Record<string, string>;
  retries: Retries;
  fetch: typeof globalThis.fetch;
  /** Per-try timeout in milliseconds. */
  timeout: number;
  sleep: (seconds: number) => Promise<void>;
}

export const sleep = (seconds: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, Math.max(0, seconds * 1000)));

export function urlOf(transport: Transport, call: Call): string {
  const url = new URL(transport.baseUrl + call.path);
  for (const [name, value] of Object.entries(call.query ?? {})) {
    if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
  }
  return url.toString();
}

/** Send a Call with the retry policy; the successful response, or the typed error. */
export async function send(transport: Transport, call: Call): Promise<Response> {
  const body = call.raw ? call.raw.data as BodyInit : call.body === undefined ? undefined : encodeJson(call.body);
  const headers: Record<string, string> = { ...transport.headers };
  if (call.idempotencyKey) headers[IDEMPOTENCY_HEADER] = call.idempotencyKey;
  if (call.raw) headers["Content-Type"] = call.raw.contentType;
  else if (body !== undefined) headers["Content-Type"] = "application/json";
  const url = urlOf(transport, call);
  let attempt = 0;
  let waited = 0;
  for (;;) {
    attempt += 1;
    let response: Response;
    try {
      response = await transport.fetch(url, { method: call.method, headers, body,
        signal: AbortSignal.timeout(transport.timeout) });
    } catch (error) {
      if (attempt >= transport.retries.attempts) {
        // A refused connection says only "fetch failed": name the address, and the cause under it.
        const name = (error as Error)?.name ?? "Error";
        const cause = (error as { cause?: { code?: string; message?: string } })?.cause;
        const why = cause?.code ?? cause?.message;
        throw new TransportError(`could not reach memoryui at ${url}: ${name}: `
          + `${(error as Error)?.message ?? String(error)}${why ? ` (${why})` : ""}`,
          { code: "transport_error", cause: error });
      }
      await transport.sleep(transport.retries.delay(attempt));
      continue;
    }
    if (response.ok) return response;
    const wait = transport.retries.waitBeforeRetry(attempt, response.status, response.headers.get("Retry-After"),
      waited);
    if (wait !== null) {
      await response.body?.cancel().catch(() => undefined);
      await transport.sleep(wait);
      waited += wait;
      continue;
    }
    throw await errorFromResponse(response);
  }
}
