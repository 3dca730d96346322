/** MemwellClient against the live API: every call of its surface, as a user makes it. */

import assert from "node:assert/strict";
import { describe, test } from "node:test";

import {
  type ChatStreamEvent, ForbiddenError, InvalidInputError, MemwellClient, NotFoundError,
  PayloadTooLargeError, UnauthorizedError,
} from "@memwell/client";
import { client, freshId, stack } from "./stack.js";

describe("chat", () => {
  test("answers as one JSON and remembers the exchange", async () => {
    const mw = client();
    const user = freshId("chat");
    const reply = await mw.chat({ user_id: user, session_id: "s1", message: "My sister Maren lives in Tromsø." });
    assert.equal(reply.reply, "fake reply to: My sister Maren lives in Tromsø.");
    assert.equal(reply.turn_ids.length, 2);
    const statuses = await mw.waitForTurns(reply.turn_ids, { timeoutMs: 60_000 });
    assert.deepEqual(statuses.map((s) => s.status), ["processed", "processed"]);
    const session = await mw.getSession("s1", { user_id: user });
    assert.deepEqual(session.buffer.turns.map((t) => t.content), [
      "My sister Maren lives in Tromsø.",
      "fake reply to: My sister Maren lives in Tromsø.",
    ]);
  });

  test("streams memories, tokens and done as an async iterator", async () => {
    const mw = client();
    const user = freshId("stream");
    await mw.addMemory({ user_id: user, content: "Maren lives in Tromsø." });
    const events: ChatStreamEvent[] = [];
    for await (const event of mw.chatStream({ user_id: user, session_id: "s2", message: "Where does Maren live?" })) {
      events.push(event);
    }
    const first = events[0];
    const last = events.at(-1);
    assert.ok(first?.event === "memories" && first.memories.some((m) => m.content.includes("Tromsø")));
    assert.ok(last?.event === "done" && last.turn_ids.length === 2 && "total" in last.timings_ms);
    const tokens = events.slice(1, -1);
    assert.ok(tokens.length > 1 && tokens.every((e) => e.event === "token"));
    const text = tokens.map((e) => (e.event === "token" ? e.delta : "")).join("");
    assert.equal(text, "fake reply to: Where does Maren live?");
    await mw.waitForTurns(last.turn_ids);
    const session = await mw.getSession("s2", { user_id: user });
    assert.deepEqual(session.buffer.turns.map((t) => t.content), ["Where does Maren live?", text]);
  });

  test("a refused stream throws the mapped error before any event", async () => {
    const events = client().chatStream({ user_id: "", session_id: "s", message: "hi" });
    await assert.rejects(events.next(), InvalidInputError);
  });
});

describe("turns, search and context", () => {
  test("turns are consolidated, then found by search and context", async () => {
    const mw = client();
    const user = freshId("turns");
    const accepted = await mw.addTurns([
      { user_id: user, session_id: "s1", content: "I am allergic to peanuts." },
      { user_id: user, session_id: "s1", role: "assistant", content: "Noted, no peanuts." },
    ]);
    assert.equal(accepted.accepted, 2);
    // Ids are made client-side, so a retried batch is the same batch.
    assert.ok(accepted.turn_ids.every((id) => /^[0-9a-f]{32}$/.test(id)));
    const again = await mw.addTurns([{ id: accepted.turn_ids[0], user_id: user, session_id: "s1", content: "I am allergic to peanuts." }]);
    assert.deepEqual(again.turn_ids, [accepted.turn_ids[0]]);
    const one = await mw.addTurn({ user_id: user, session_id: "s1", content: "I live in Porto." });
    await mw.waitForTurns([...accepted.turn_ids, one]);

    const found = await mw.search({ user_id: user, query: "what food allergy do I have?", k: 3 });
    assert.ok(found.hits.length >= 1);
    const top = found.hits[0]!;
    assert.match(top.content, /peanuts/);
    assert.ok(top.score > 0 && top.similarity !== undefined);

    const context = await mw.context({ user_id: user, session_id: "s1", query: "allergies", token_budget: 2000 });
    assert.match(context.data_block, /peanuts/);
    assert.ok(context.tokens <= context.token_budget);
    assert.ok(context.recent.some((t) => t.content === "I live in Porto."));
  });

  test("an unknown turn is `unknown`, not an error", async () => {
    const status = await client().turnStatus(freshId("nope"));
    assert.equal(status.status, "unknown");
  });
});

describe("memories", () => {
  test("add, list, get, edit, history and delete", async () => {
    const mw = client();
    const user = freshId("memories");
    const added = await mw.addMemories({
      user_id: user,
      memories: ["Ada lives in Berlin.", { content: "Ada likes jazz.", kind: "preference", metadata: { src: "ts" } }],
    });
    assert.deepEqual(added.results.map((r) => r.action), ["added", "added"]);
    const moved = await mw.addMemory({ user_id: user, content: "Ada moved to Lisbon.", source: "crm" });
    assert.equal(moved.action, "superseded");
    assert.equal(moved.related_memory_id, added.results[0]!.memory_id);

    const first = await mw.listMemories({ user_id: user, limit: 1 });
    assert.equal(first.total, 2);
    assert.ok(first.next_cursor);
    const second = await mw.listMemories({ user_id: user, limit: 1, cursor: first.next_cursor });
    assert.deepEqual(
      new Set([first.memories[0]!.id, second.memories[0]!.id]),
      new Set([moved.memory_id, added.results[1]!.memory_id]),
    );
    const preferences = await mw.listMemories({ user_id: user, kind: ["preference"] });
    assert.deepEqual(preferences.memories.map((m) => m.content), ["Ada likes jazz."]);

    const jazz = await mw.getMemory(added.results[1]!.memory_id);
    assert.deepEqual([jazz.kind, jazz.metadata], ["preference", { src: "ts" }]);
    const edited = await mw.editMemory(jazz.id, { content: "Ada loves free jazz.", pinned: true });
    assert.deepEqual([edited.content, edited.pinned], ["Ada loves free jazz.", true]);

    const gone = await mw.deleteMemory(jazz.id);
    assert.ok(gone.deleted_at && !gone.content.includes("jazz"));
    assert.equal((await mw.getMemory(jazz.id)).deleted_at, gone.deleted_at);
    const history = await mw.memoryHistory(jazz.id);
    assert.deepEqual(history.events.map((e) => e.event), ["add", "update", "delete", "redact"]);
    await assert.rejects(mw.getMemory(freshId("no-such-memory")), InvalidInputError);
    await assert.rejects(mw.getMemory("00000000-0000-4000-8000-000000000000"), NotFoundError);
    const withDeleted = await mw.listMemories({ user_id: user, include: ["deleted", "superseded"] });
    assert.equal(withDeleted.total, 3);
  });
});

describe("sessions, users and profile", () => {
  test("list, get, close and delete a session; list and get users; erase one", async () => {
    const mw = client();
    const user = freshId("sessions");
    const ids = await mw.addTurns(["a", "b"].map((s) => ({ user_id: user, session_id: s, content: `Note for ${s}.` })));
    await mw.waitForTurns(ids.turn_ids);
    const sessions = await mw.listSessions({ user_id: user });
    assert.deepEqual(new Set(sessions.sessions.map((s) => s.id)), new Set(["a", "b"]));
    const closed = await mw.closeSession("a", { user_id: user });
    assert.equal(closed.status, "closed");
    const deleted = await mw.deleteSession("b", { user_id: user });
    assert.equal(deleted.session_id, "b");
    await assert.rejects(mw.getSession("b", { user_id: user }), NotFoundError);

    const detail = await mw.getUser(user);
    assert.equal(detail.user_id, user);
    let cursor: string | undefined;
    const seen: string[] = [];
    do {
      const page = await mw.listUsers({ limit: 100, ...(cursor ? { cursor } : {}) });
      seen.push(...page.users.map((u) => u.user_id));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    assert.ok(seen.includes(user));

    const receipt = await mw.eraseUser(user);
    assert.equal(receipt.user_id, user);
    assert.ok(Object.values(receipt.counts).some((n) => n > 0));
  });

  test("the profile shows current facts by entity", async () => {
    const profile = await client().getProfile(stack.profileUser, { entities_limit: 5 });
    assert.equal(profile.user_id, stack.profileUser);
    const caroline = profile.facts[0]!;
    assert.equal(caroline.name, "Caroline");
    assert.equal(caroline.slots.lives_in?.value, "Boston");
    assert.ok(profile.entities.length <= 5);
  });

  test("ready", async () => {
    assert.equal(await client().ready(), true);
  });
});

describe("errors are typed from problem+json", () => {
  test("invalid input carries the field errors", async () => {
    const err = await client().search({ user_id: "u", query: "x", k: 0 }).catch((e: unknown) => e);
    assert.ok(err instanceof InvalidInputError);
    assert.equal(err.status, 422);
    assert.equal(err.code, "invalid-input");
    assert.ok(err.errors.length >= 1 && err.requestId);
  });

  test("an unknown key is unauthorized; a read key may not write", async () => {
    await assert.rejects(client("mw_not-a-key").listUsers(), UnauthorizedError);
    const readOnly = client(stack.readKey);
    await assert.rejects(readOnly.addMemory({ user_id: freshId("ro"), content: "x y z" }), ForbiddenError);
  });

  test("a query over the server's head limit is too large (431)", async () => {
    const err = await client()
      .listMemories({ user_id: freshId("long"), cursor: "A".repeat(20_000) })
      .catch((e: unknown) => e);
    assert.ok(err instanceof PayloadTooLargeError);
    assert.equal(err.status, 431);
    assert.equal(err.code, "headers-too-large");
  });

  test("no API at all is a TransportError after the retries", async () => {
    const mw = new MemwellClient({ baseUrl: "http://127.0.0.1:9", apiKey: "k", maxRetries: 1 });
    await assert.rejects(mw.listUsers(), { name: "TransportError" });
  });
});
