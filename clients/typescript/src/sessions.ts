/**
 * What the session doors share (the Claude Agent SDK store, the OpenAI Agents session):
 * waits between tries of a conditional append that lost to another writer, one lock
 * per stream, and idempotency keys derived from what is sent.
 */

import { Conflict } from "./errors.js";

export const CONFLICT_DEADLINE = 30;

/**
 * Waits between tries of a conditional append (`expected_entries`) that lost to another
 * writer of the same session: full jitter over 0.05 s, 0.1 s, … at most 2 s, so writers
 * do not collide again in lockstep. `wait()` is null once the next try would start past
 * `deadline` seconds: the caller then throws the Conflict it got.
 */
export class ConflictBackoff {
  private readonly until: number;
  tries = 0;

  constructor(deadline = CONFLICT_DEADLINE, private readonly first = 0.05, private readonly most = 2) {
    this.until = performance.now() / 1000 + deadline;
  }

  wait(): number | null {
    this.tries += 1;
    const wait = Math.random() * Math.min(this.most, this.first * 2 ** (this.tries - 1));
    return performance.now() / 1000 + wait <= this.until ? wait : null;
  }
}

/** True for the conflict another writer of the stream causes (it came first). */
export const lostToAnotherWriter = (error: unknown): error is Conflict =>
  error instanceof Conflict && (error.code === "entries_conflict" || error.code === "conflict");

/** Runs `work` after every earlier call for the same name has finished (calls in order, per stream). */
export class Locks {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(name: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(name) ?? Promise.resolve();
    const result = before.then(work, work);
    const tail = result.catch(() => undefined);
    this.tails.set(name, tail);
    void tail.then(() => {
      if (this.tails.get(name) === tail) this.tails.delete(name);
    });
    return result;
  }
}

/** JSON with object keys sorted, so that equal values give equal text (and equal keys). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value).sort().filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

export const sleepSeconds = (seconds: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, seconds * 1000));
