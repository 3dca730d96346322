/**
 * Errors the client throws, mapped from the API's problem+json answers.
 *
 * The problem's `type` is a URI ending in a stable code (`.../problems/not-found`);
 * that code picks the class, so callers catch meaning, not status numbers:
 *
 *     try { await mw.memories.get(id); }
 *     catch (err) { if (err instanceof NotFoundError) { ... } }
 */

import type { components } from "./schema.js";

export type Problem = components["schemas"]["Problem"] & Record<string, unknown>;

/** Base of every error the client throws. */
export class MemwellError extends Error {
  override name = "MemwellError";
}

/** The API could not be reached, or did not answer in time (after any retries). */
export class TransportError extends MemwellError {
  override name = "TransportError";
}

/** The API answered with an error: a problem+json body when it is Memwell. */
export class APIError extends MemwellError {
  static readonly code: string = "http-error";
  override name = "APIError";
  readonly status: number;
  readonly title: string;
  readonly detail: unknown;
  readonly type: string;
  readonly body: Partial<Problem>;
  readonly requestId: string | undefined;
  /** Seconds the server asked to wait (the Retry-After header), when it sent one. */
  readonly retryAfter: number | undefined;

  constructor(
    status: number,
    body: Partial<Problem>,
    options: { title?: string; requestId?: string; retryAfter?: number } = {},
  ) {
    const title = typeof body.title === "string" ? body.title : (options.title ?? "");
    let text = `${status} ${title}`.trim();
    if (body.detail !== undefined && body.detail !== null) {
      text += `: ${typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)}`;
    }
    if (options.requestId) text += ` (request id ${options.requestId})`;
    super(text);
    this.status = status;
    this.title = title;
    this.detail = body.detail;
    this.type = typeof body.type === "string" ? body.type : "";
    this.body = body;
    this.requestId = options.requestId;
    this.retryAfter = options.retryAfter;
  }

  /** The stable code at the end of the problem `type` (`not-found`, `rate-limited`, ...). */
  get code(): string {
    return problemCode(this.type) || (this.constructor as typeof APIError).code;
  }

  /** Field-level validation errors, when the API sent them. */
  get errors(): Record<string, unknown>[] {
    return Array.isArray(this.body.errors) ? this.body.errors : [];
  }
}

/** 400 or 422: the request was refused as invalid; nothing was stored. */
export class InvalidInputError extends APIError {
  static override readonly code: string = "invalid-input";
  override name = "InvalidInputError";
}

/** 401: no API key, or a key the API does not know. */
export class UnauthorizedError extends APIError {
  static override readonly code: string = "unauthorized";
  override name = "UnauthorizedError";
}

/** 403: the key lacks the scope this call needs. */
export class ForbiddenError extends APIError {
  static override readonly code: string = "forbidden";
  override name = "ForbiddenError";
}

/** 404: no such object for this tenant. */
export class NotFoundError extends APIError {
  static override readonly code: string = "not-found";
  override name = "NotFoundError";
}

/** 409: the request conflicts with the object's state. */
export class ConflictError extends APIError {
  static override readonly code: string = "conflict";
  override name = "ConflictError";
}

/**
 * 413: a message, batch or metadata over the API's limits; 431: a request line and
 * headers over them (a query string too long).
 */
export class PayloadTooLargeError extends APIError {
  static override readonly code: string = "too-large";
  override name = "PayloadTooLargeError";
}

/** 429: over the key's rate limit; `retryAfter` says when to come back. */
export class RateLimitedError extends APIError {
  static override readonly code: string = "rate-limited";
  override name = "RateLimitedError";
}

/** 503: a backing service (database, broker, model endpoint) is away for now. */
export class UnavailableError extends APIError {
  static override readonly code: string = "unavailable";
  override name = "UnavailableError";
}

/** 503 `overloaded`: this API process is at its in-flight limit; nothing was done. */
export class OverloadedError extends UnavailableError {
  static override readonly code: string = "overloaded";
  override name = "OverloadedError";
}

/** 5xx: a fault on the server's side. */
export class ServerError extends APIError {
  static override readonly code: string = "internal";
  override name = "ServerError";
}

type ErrorClass = new (
  status: number,
  body: Partial<Problem>,
  options?: { title?: string; requestId?: string; retryAfter?: number },
) => APIError;

const BY_CODE: Record<string, ErrorClass> = Object.fromEntries(
  [
    InvalidInputError, UnauthorizedError, ForbiddenError, NotFoundError, ConflictError,
    PayloadTooLargeError, RateLimitedError, UnavailableError, OverloadedError, ServerError,
  ].map((cls) => [cls.code, cls]),
);
BY_CODE["invalid-cursor"] = InvalidInputError;
BY_CODE["bad-request"] = InvalidInputError;
BY_CODE["headers-too-large"] = PayloadTooLargeError;

const BY_STATUS: Record<number, ErrorClass> = {
  400: InvalidInputError, 401: UnauthorizedError, 403: ForbiddenError, 404: NotFoundError,
  409: ConflictError, 413: PayloadTooLargeError, 422: InvalidInputError,
  429: RateLimitedError, 431: PayloadTooLargeError, 503: UnavailableError,
};

export function problemCode(typeUri: string): string {
  const trimmed = typeUri.replace(/\/+$/, "");
  return trimmed.slice(trimmed.lastIndexOf("/") + 1);
}

/** The error class for a problem `type` (its last path segment), else for the status. */
export function errorClass(status: number, typeUri: string): ErrorClass {
  const byCode = typeUri ? BY_CODE[problemCode(typeUri)] : undefined;
  return byCode ?? BY_STATUS[status] ?? (status >= 500 ? ServerError : APIError);
}

/** The mapped error for a problem body. */
export function problemError(
  status: number,
  body: Partial<Problem>,
  options: { title?: string; requestId?: string; retryAfter?: number } = {},
): APIError {
  const cls = errorClass(status, typeof body.type === "string" ? body.type : "");
  return new cls(status, body, options);
}
