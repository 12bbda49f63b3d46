export { Memoryui, mergeActivePages, PROJECT_HEADER, USER_AGENT } from "./client.js";
export type { AppendOptions, ClientOptions, ImportFileOptions, WriteOptions } from "./client.js";
export { encodeJson, newIdempotencyKey, parseRetryAfter, Retries, RETRY_STATUSES } from "./core.js";
export type { Call, RawBody, RetryOptions } from "./core.js";
export * from "./errors.js";
export { NothingToSend, settle, toAnthropicMessages, toGeminiContents, toOpenAIMessages } from "./formats.js";
export type { JournalMode } from "./formats.js";
export type * from "./types.js";
