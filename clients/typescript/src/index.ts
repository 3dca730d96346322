/** The Memwell TypeScript client: `MemwellClient`, its errors, and the API's types. */

export { type CallOptions, MemwellClient } from "./client.js";
export {
  APIError, ConflictError, errorClass, ForbiddenError, InvalidInputError, MemwellError,
  NotFoundError, OverloadedError, PayloadTooLargeError, type Problem, RateLimitedError,
  ServerError, TransportError, UnauthorizedError, UnavailableError,
} from "./errors.js";
export type { components, operations, paths } from "./schema.js";
export { type ChatStreamEvent, readEvents } from "./sse.js";
export {
  backoffMs, type ClientOptions, DEFAULT_BASE_URL, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS,
  parseRetryAfter,
} from "./transport.js";
export type * from "./types.js";
