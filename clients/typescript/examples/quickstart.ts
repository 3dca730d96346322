import { MemwellClient, NotFoundError } from "@memwell/client";

// MEMWELL_API_URL and MEMWELL_API_KEY come from the environment.
const mw = new MemwellClient();
const user = `docs-${Date.now()}`;

// Memory for your own model loop: store facts, send turns, search.
await mw.addMemory({ user_id: user, content: "I am allergic to peanuts." });
const { turn_ids } = await mw.addTurns([
  { user_id: user, session_id: "trip", content: "I moved to Lisbon last week." },
]);
await mw.waitForTurns(turn_ids); // consolidated by the workers
const { hits } = await mw.search({ user_id: user, query: "What am I allergic to?", k: 3 });
console.log("top memory:", hits[0]?.content);

// Or chat through Memwell, streamed as the reply is produced.
const stream = mw.chatStream({ user_id: user, session_id: "trip", message: "Plan my meals." });
for await (const event of stream) {
  if (event.event === "token") process.stdout.write(event.delta);
  if (event.event === "done") console.log(`\nremembered as turns ${event.turn_ids.join(", ")}`);
}

// Errors are typed from the API's problem+json.
try {
  await mw.getMemory("00000000-0000-4000-8000-000000000000");
} catch (err) {
  if (!(err instanceof NotFoundError)) throw err;
  console.log("no such memory:", err.code);
}
