/**
 * One HTTP exchange with retries: headers, the retry policy, and turning an error
 * answer into the mapped error. The client describes each call as data (`Call`) and
 * leaves the rest to `Transport.send`.
 *
 * Retry policy (as the Python SDK's): a call marked `retryable` (GET, PATCH, DELETE,
 * the read-only POSTs, and POST /v1/turns, whose turns carry client-made ids) is
 * retried on a network failure and on 429, 502, 503 and 504. Any call, retryable or
 * not, is retried on a 429 `rate-limited` or a 503 `overloaded`: the API refuses those
 * before doing any of the work. The wait is the server's Retry-After when it sent one,
 * else exponential backoff with jitter.
 */

import { randomUUID } from "node:crypto";

import { problemCode, problemError, type Problem, TransportError } from "./errors.js";

export const DEFAULT_BASE_URL = "http://127.0.0.1:8420";
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RETRIES = 3;
const RETRY_STATUSES = new Set([429, 502, 503, 504]);
const REFUSED_UNDONE = new Set(["rate-limited", "overloaded"]);
const BACKOFF_BASE_MS = 250;
const BACKOFF_MAX_MS = 8_000;
const RETRY_AFTER_MAX_MS = 32_000;
const USER_AGENT = "memwell-typescript-client/0.1";

export interface ClientOptions {
  /** The API (default: $MEMWELL_API_URL, else http://127.0.0.1:8420). */
  baseUrl?: string;
  /** Sent as `Authorization: Bearer <key>` (default: $MEMWELL_API_KEY). */
  apiKey?: string;
  /** Milliseconds per HTTP exchange (a stream: until its headers arrive). */
  timeoutMs?: number;
  /** Extra attempts for a call that may be repeated. */
  maxRetries?: number;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

export type Query = Record<string, string | number | boolean | readonly string[] | null | undefined>;

export interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Query;
  body?: unknown;
  /** Safe to send again after a failure (see the module's policy). */
  retryable: boolean;
  /** Sent as Idempotency-Key on a write, the same on every attempt (default: made here). */
  idempotencyKey?: string;
  /** Ask for Server-Sent Events instead of JSON. */
  stream?: boolean;
  signal?: AbortSignal;
}

function env(name: string): string | undefined {
  return typeof process !== "undefined" ? process.env[name] : undefined;
}

/** Path segments are the caller's strings: escape them. */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

/** Milliseconds to wait before attempt `attempt + 1`: the server's Retry-After, else backoff. */
export function backoffMs(attempt: number, retryAfter: string | null = null): number {
  const after = parseRetryAfter(retryAfter);
  if (after !== undefined) return Math.min(after * 1000, RETRY_AFTER_MAX_MS);
  const delay = Math.min(BACKOFF_BASE_MS * 2 ** Math.min(attempt, 16), BACKOFF_MAX_MS);
  return delay * (0.5 + Math.random() / 2);
}

/** Retry-After in seconds: delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(seconds, 0);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max((at - Date.now()) / 1000, 0);
}

const sleep = (ms: number, signal?: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });

async function readProblem(response: Response): Promise<Partial<Problem>> {
  try {
    const parsed: unknown = JSON.parse(await response.text());
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed)
      ? (parsed as Partial<Problem>)
      : {};
  } catch {
    return {};
  }
}

/** The response with its body read (inside the time limit), then `done` called. */
async function buffered(response: Response, done: () => void): Promise<Response> {
  try {
    const bytes = await response.arrayBuffer();
    return new Response(bytes.byteLength ? bytes : null, {
      status: response.status, statusText: response.statusText, headers: response.headers,
    });
  } finally {
    done();
  }
}

export class Transport {
  readonly baseUrl: string;
  readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly headers: Record<string, string>;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? env("MEMWELL_API_URL") ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    const key = options.apiKey ?? env("MEMWELL_API_KEY");
    this.headers = {
      "User-Agent": USER_AGENT,
      Accept: "application/json",
      ...(key ? { Authorization: `Bearer ${key}` } : {}),
      ...options.headers,
    };
  }

  url(path: string, query: Query = {}): string {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(query)) {
      if (value === undefined || value === null) continue;
      for (const item of Array.isArray(value) ? value : [value]) {
        url.searchParams.append(name, String(item));
      }
    }
    return url.toString();
  }

  /** The parsed JSON of a success; the mapped APIError for an error answer. */
  async json<T>(call: Call): Promise<T> {
    const response = await this.send(call);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** The response of a success (its body unread); throws the mapped error otherwise. */
  async send(call: Call): Promise<Response> {
    const requestId = randomUUID().replaceAll("-", "");
    const headers: Record<string, string> = { ...this.headers, "X-Request-ID": requestId };
    if (call.body !== undefined) headers["Content-Type"] = "application/json";
    if (call.stream) headers.Accept = "text/event-stream";
    if (call.method !== "GET") headers["Idempotency-Key"] = call.idempotencyKey ?? requestId;
    const url = this.url(call.path, call.query);
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
    for (let attempt = 0; ; attempt++) {
      const retriesLeft = attempt < this.maxRetries;
      let response: Response;
      // A stream's time limit ends when its headers arrive: the reply may take longer.
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(new Error(`no answer in ${this.timeoutMs} ms`)), this.timeoutMs);
      try {
        const signal = call.signal ? AbortSignal.any([call.signal, timeout.signal]) : timeout.signal;
        response = await this.fetch(url, { method: call.method, headers, body, signal });
        if (call.stream) clearTimeout(timer);
        else response = await buffered(response, () => clearTimeout(timer));
      } catch (err) {
        clearTimeout(timer);
        if (call.signal?.aborted) throw err;
        if (retriesLeft && call.retryable) {
          await sleep(backoffMs(attempt), call.signal);
          continue;
        }
        const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
        throw new TransportError(`${call.method} ${call.path}: ${reason}`, { cause: err });
      }
      if (response.ok) return response;
      const problem = await readProblem(response);
      const retryAfter = response.headers.get("Retry-After");
      const refusedUndone = REFUSED_UNDONE.has(problemCode(String(problem.type ?? "")));
      if (retriesLeft && RETRY_STATUSES.has(response.status) && (call.retryable || refusedUndone)) {
        await sleep(backoffMs(attempt, retryAfter), call.signal);
        continue;
      }
      throw problemError(response.status, problem, {
        title: response.statusText,
        requestId: response.headers.get("X-Request-ID") ?? requestId,
        retryAfter: parseRetryAfter(retryAfter),
      });
    }
  }
}
