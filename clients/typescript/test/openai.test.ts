/** The OpenAI-compatible door driven by the official `openai` npm client, streaming
 * included: an app changes its base URL and key, and its exchanges are remembered. */

import assert from "node:assert/strict";
import { test } from "node:test";

import OpenAI from "openai";

import { client, freshId, stack } from "./stack.js";

const openai = new OpenAI({ baseURL: `${stack.apiUrl}/v1`, apiKey: stack.key, maxRetries: 0 });

test("a completion gets the user's memories and is remembered", async () => {
  const mw = client();
  const user = freshId("openai");
  await mw.addMemory({ user_id: user, content: "The user is allergic to peanuts." });
  const answer = await openai.chat.completions.create(
    {
      model: "gpt-4o-mini",
      user,
      messages: [
        { role: "system", content: "You are a travel agent." },
        { role: "user", content: "Plan my flight meals." },
      ],
    },
    { headers: { "X-Memwell-Session": "trip", "Idempotency-Key": freshId("idem") } },
  );
  assert.equal(answer.choices[0]?.message.content, "fake reply to: Plan my flight meals.");
  const session = await waitForBuffer(user, "trip", 2);
  assert.deepEqual(session, ["Plan my flight meals.", "fake reply to: Plan my flight meals."]);
});

test("a streamed completion arrives in chunks and is remembered whole", async () => {
  const user = freshId("openai-stream");
  const stream = await openai.chat.completions.create(
    { model: "gpt-4o-mini", user, stream: true, messages: [{ role: "user", content: "Tell me about Porto please." }] },
    { headers: { "X-Memwell-Session": "stream" } },
  );
  const pieces: string[] = [];
  for await (const chunk of stream) pieces.push(chunk.choices[0]?.delta?.content ?? "");
  assert.ok(pieces.filter(Boolean).length > 1, `one chunk only: ${JSON.stringify(pieces)}`);
  assert.equal(pieces.join(""), "fake reply to: Tell me about Porto please.");
  const session = await waitForBuffer(user, "stream", 2);
  assert.deepEqual(session, ["Tell me about Porto please.", "fake reply to: Tell me about Porto please."]);
});

test("models are listed and errors come back as the openai client's", async () => {
  const models = await openai.models.list();
  assert.ok(models.data.length >= 1);
  const bad = new OpenAI({ baseURL: `${stack.apiUrl}/v1`, apiKey: "mw_wrong", maxRetries: 0 });
  await assert.rejects(
    bad.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    (err: unknown) => err instanceof OpenAI.AuthenticationError && err.status === 401,
  );
});

/** The session buffer's turns, once it holds `count` of them (the door appends after answering). */
async function waitForBuffer(user: string, session: string, count: number): Promise<string[]> {
  const mw = client();
  const deadline = Date.now() + 30_000;
  for (;;) {
    const turns = await mw
      .getSession(session, { user_id: user })
      .then((s) => s.buffer.turns.map((t) => t.content))
      .catch(() => [] as string[]);
    if (turns.length >= count) return turns;
    if (Date.now() > deadline) throw new Error(`the buffer of ${session} holds ${turns.length} turns`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
