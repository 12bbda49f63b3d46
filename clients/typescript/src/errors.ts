/**
 * The API's errors as exceptions: each carries the API's `code`, `message` and `field`
 * ({"error": {"code", "message", "field"}}), and the HTTP status when there was an answer.
 */

export class MemoryuiError extends Error {
  readonly code: string;
  readonly field: string | null;
  readonly status: number | null;
  readonly response: Response | null;

  constructor(message: string, options: { code?: string; field?: string | null; status?: number | null;
                                          response?: Response | null; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code ?? "error";
    this.field = options.field ?? null;
    this.status = options.status ?? null;
    this.response = options.response ?? null;
  }

  override toString(): string {
    const where = this.field ? ` [${this.field}]` : "";
    const status = this.status ? `${this.status} ` : "";
    return `${status}${this.code}${where}: ${this.message}`;
  }
}

/** 400: the body is not JSON, a cursor is not one the API gave out. */
export class BadRequest extends MemoryuiError {}
/** 401: no key, or an unknown or revoked one. */
export class Unauthenticated extends MemoryuiError {}
/** 403: the key lacks the scope. */
export class Forbidden extends MemoryuiError {}
/** 404: no such conversation (or fact, receipt). */
export class NotFound extends MemoryuiError {}
/** 409: e.g. `position_conflict`, `checkpoint_before_latest`, `external_id_taken`, `entries_conflict`. */
export class Conflict extends MemoryuiError {}
/** 409 `position_conflict`: expected_position was not the next position; nothing was written. */
export class PositionConflict extends Conflict {}
/** 409 `checkpoint_splits_tool_call`: a fold there would leave a tool result without its call. */
export class CheckpointSplitsToolCall extends Conflict {}
/** 413: a message over the server's limit, or a body over its request size. */
export class PayloadTooLarge extends MemoryuiError {}
/** 415. */
export class UnsupportedMediaType extends MemoryuiError {}
/** 422: the request is invalid; `field` names what (e.g. `messages.3.tool_call_id`). */
export class InvalidInput extends MemoryuiError {}
/**
 * `unencodable`, raised before anything is sent: a value has no JSON form (a function,
 * a bigint, undefined in an array, NaN or Infinity, a cycle) or a string holds an
 * unpaired surrogate, which is not UTF-8. `field` is its path in the body.
 */
export class Unencodable extends InvalidInput {}
/** 422 `idempotency_key_reused`: the key was used for a different request. */
export class IdempotencyKeyReused extends InvalidInput {}
/** 429, after the retries ran out. */
export class RateLimited extends MemoryuiError {}
/** 5xx, after the retries ran out (for 502/503/504). */
export class ServerError extends MemoryuiError {}
/** The server could not be reached or the connection broke, after the retries ran out. */
export class TransportError extends MemoryuiError {}

const BY_STATUS: Record<number, typeof MemoryuiError> = {
  400: BadRequest, 401: Unauthenticated, 403: Forbidden, 404: NotFound, 409: Conflict,
  413: PayloadTooLarge, 415: UnsupportedMediaType, 422: InvalidInput, 429: RateLimited,
};
const BY_CODE: Record<string, typeof MemoryuiError> = {
  position_conflict: PositionConflict, idempotency_key_reused: IdempotencyKeyReused,
  checkpoint_splits_tool_call: CheckpointSplitsToolCall,
};

/** The typed error for an error answer; reads its body (the response is consumed). */
export async function errorFromResponse(response: Response): Promise<MemoryuiError> {
  let code = `http_${response.status}`;
  let message = response.statusText || "error";
  let field: string | null = null;
  const text = await response.text().catch(() => "");
  try {
    const error = (JSON.parse(text) as { error?: { code?: string; message?: string; field?: string | null } })
      .error ?? {};
    code = error.code || code;
    message = error.message || message;
    field = error.field ?? null;
  } catch {
    message = text.slice(0, 300) || message;
  }
  const Class = BY_CODE[code] ?? BY_STATUS[response.status] ?? (response.status >= 500 ? ServerError
    : MemoryuiError);
  return new Class(message, { code, field, status: response.status, response });
}
