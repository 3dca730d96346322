/** The retry policy: against the live API behind a tight rate limit (a real 429 with
 * Retry-After), and against a scripted local server for what a healthy stack will not
 * answer on demand (503s, an overloaded refusal). */

import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  MemwellClient, OverloadedError, RateLimitedError, UnavailableError, backoffMs, parseRetryAfter,
} from "@memwell/client";
import { freshId, stack } from "./stack.js";

describe("against a live rate limit (1/s, burst 2)", () => {
  test("without retries a 429 is a RateLimitedError with retryAfter; with them, the call waits and succeeds", async () => {
    const strict = new MemwellClient({ baseUrl: stack.limitedUrl, apiKey: stack.limitedKey, maxRetries: 0 });
    // Six at once against a burst of two: some are refused however slow the host.
    const settled = await Promise.allSettled([1, 2, 3, 4, 5, 6].map(() => strict.turnStatus(freshId("rl"))));
    const limited = settled.find((s) => s.status === "rejected")?.reason as unknown;
    assert.ok(limited instanceof RateLimitedError, String(limited));
    assert.equal(limited.status, 429);
    assert.ok(limited.retryAfter !== undefined && limited.retryAfter >= 1);

    const patient = new MemwellClient({ baseUrl: stack.limitedUrl, apiKey: stack.limitedKey, maxRetries: 4 });
    const started = Date.now();
    const results = await Promise.all([1, 2, 3].map(() => patient.turnStatus(freshId("rl"))));
    assert.deepEqual(results.map((r) => r.status), ["unknown", "unknown", "unknown"]);
    // The bucket was empty: at least one call waited out a Retry-After of >= 1 s.
    assert.ok(Date.now() - started >= 900, `took ${Date.now() - started} ms`);
  });
});

interface Seen {
  method: string;
  url: string;
  idempotencyKey: string | undefined;
  at: number;
}

/** A local HTTP server answering each request with the next scripted answer. */
class Scripted {
  private server: Server;
  seen: Seen[] = [];
  script: Array<{ status: number; body: unknown; headers?: Record<string, string> }> = [];

  constructor() {
    this.server = createServer((req: IncomingMessage, res) => {
      req.resume();
      req.on("end", () => {
        this.seen.push({
          method: req.method ?? "", url: req.url ?? "", at: Date.now(),
          idempotencyKey: req.headers["idempotency-key"] as string | undefined,
        });
        const next = this.script.shift() ?? { status: 200, body: {} };
        const type = next.status >= 400 ? "application/problem+json" : "application/json";
        res.writeHead(next.status, { "Content-Type": type, ...next.headers });
        res.end(JSON.stringify(next.body));
      });
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stop(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const problem = (code: string, status: number) => ({ type: `https://memwell.dev/problems/${code}`, title: code, status });

describe("against a scripted server", () => {
  const scripted = new Scripted();
  let url = "";
  before(async () => { url = await scripted.start(); });
  after(() => scripted.stop());

  test("a 503 with Retry-After is waited out, with one idempotency key for every attempt", async () => {
    scripted.seen = [];
    scripted.script = [
      { status: 503, body: problem("unavailable", 503), headers: { "Retry-After": "1" } },
      { status: 200, body: { result: "ok", memory_id: "m" } },
    ];
    const mw = new MemwellClient({ baseUrl: url, apiKey: "k" });
    await mw.editMemory("m/1", { pinned: true }, { idempotencyKey: "edit-1" });
    assert.equal(scripted.seen.length, 2);
    assert.equal(scripted.seen[0]!.url, "/v1/memories/m%2F1");
    assert.deepEqual(scripted.seen.map((s) => s.idempotencyKey), ["edit-1", "edit-1"]);
    assert.ok(scripted.seen[1]!.at - scripted.seen[0]!.at >= 950);
  });

  test("a write that is not safe to repeat is not retried on 503 unavailable", async () => {
    scripted.seen = [];
    scripted.script = [{ status: 503, body: problem("unavailable", 503), headers: { "Retry-After": "0" } }];
    const mw = new MemwellClient({ baseUrl: url, apiKey: "k" });
    await assert.rejects(mw.chat({ user_id: "u", session_id: "s", message: "hi" }), UnavailableError);
    assert.equal(scripted.seen.length, 1);
    assert.ok(scripted.seen[0]!.idempotencyKey);
  });

  test("but is retried on an overloaded refusal, which did none of the work", async () => {
    scripted.seen = [];
    scripted.script = [
      { status: 503, body: problem("overloaded", 503), headers: { "Retry-After": "0" } },
      { status: 429, body: problem("rate-limited", 429), headers: { "Retry-After": "0" } },
      { status: 200, body: { reply: "hello", model: "m", memories: [], turn_ids: [], timings_ms: {} } },
    ];
    const mw = new MemwellClient({ baseUrl: url, apiKey: "k" });
    const reply = await mw.chat({ user_id: "u", session_id: "s", message: "hi" });
    assert.equal(reply.reply, "hello");
    assert.equal(scripted.seen.length, 3);
    assert.equal(new Set(scripted.seen.map((s) => s.idempotencyKey)).size, 1);
  });

  test("retries stop at maxRetries with the last error, typed", async () => {
    scripted.seen = [];
    scripted.script = Array.from({ length: 3 }, () => ({
      status: 503, body: problem("overloaded", 503), headers: { "Retry-After": "0" },
    }));
    const mw = new MemwellClient({ baseUrl: url, apiKey: "k", maxRetries: 2 });
    const err = await mw.listUsers().catch((e: unknown) => e);
    assert.ok(err instanceof OverloadedError && err instanceof UnavailableError);
    assert.equal(err.retryAfter, 0);
    assert.equal(scripted.seen.length, 3);
  });

  test("backoff: Retry-After as seconds or a date, else exponential with jitter", () => {
    assert.equal(backoffMs(0, "2"), 2000);
    assert.equal(parseRetryAfter("soon"), undefined);
    const date = new Date(Date.now() + 3000).toUTCString();
    assert.ok(backoffMs(0, date) > 1000 && backoffMs(0, date) <= 3000);
    for (const attempt of [0, 1, 2, 10]) {
      const cap = Math.min(250 * 2 ** attempt, 8000);
      const wait = backoffMs(attempt);
      assert.ok(wait >= cap / 2 && wait <= cap, `${attempt}: ${wait}`);
    }
  });
});
