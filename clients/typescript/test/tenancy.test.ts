/** Two tenants' keys through the client: neither sees the other's memories, sessions
 * or users, even under the same user id. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { NotFoundError } from "@memwell/client";
import { client, freshId, stack } from "./stack.js";

test("a tenant's memories are invisible to another tenant's key", async () => {
  const mine = client(stack.key);
  const theirs = client(stack.otherKey);
  const user = freshId("tenancy"); // the same user id in both tenants
  const added = await mine.addMemory({ user_id: user, content: "The vault code is 4711." });
  const turn = await mine.addTurn({ user_id: user, session_id: "secret", content: "The vault code is 4711." });
  await mine.waitForTurns([turn]);
  const theirOwn = await theirs.addMemory({ user_id: user, content: "Their vault code is 1234." });

  await assert.rejects(theirs.getMemory(added.memory_id), NotFoundError);
  await assert.rejects(theirs.memoryHistory(added.memory_id), NotFoundError);
  await assert.rejects(theirs.editMemory(added.memory_id, { content: "hijacked" }), NotFoundError);
  await assert.rejects(theirs.deleteMemory(added.memory_id), NotFoundError);
  await assert.rejects(theirs.getSession("secret", { user_id: user }), NotFoundError);

  const found = await theirs.search({ user_id: user, query: "vault code", k: 10 });
  assert.deepEqual(found.hits.map((h) => h.id), [theirOwn.memory_id]);
  const listed = await theirs.listMemories({ user_id: user });
  assert.deepEqual(listed.memories.map((m) => m.content), ["Their vault code is 1234."]);
  const context = await theirs.context({ user_id: user, session_id: "secret", query: "vault code" });
  assert.doesNotMatch(JSON.stringify(context), /4711/);
  const sessions = await theirs.listSessions({ user_id: user });
  assert.deepEqual(sessions.sessions, []);

  // The owner still sees its own, unchanged, and not the other tenant's.
  const own = await mine.search({ user_id: user, query: "vault code", k: 10 });
  assert.ok(own.hits.some((h) => h.id === added.memory_id));
  assert.ok(own.hits.every((h) => !h.content.includes("1234")));
  assert.equal((await mine.getMemory(added.memory_id)).content, "The vault code is 4711.");
});
