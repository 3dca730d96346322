/** The event-stream reader on bodies cut at awkward places (the live stream test sees
 * only what one server's framing happens to produce). */

import assert from "node:assert/strict";
import { test } from "node:test";

import { readEvents } from "@memwell/client";

function body(...chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function collect(stream: ReadableStream<Uint8Array>): Promise<Array<{ name: string; data: string }>> {
  const events = [];
  for await (const event of readEvents(stream)) events.push(event);
  return events;
}

test("events split across chunks, CRLF cut in two, comments and multi-line data", async () => {
  const events = await collect(body(
    ": keep-alive\r", "\nevent: tok", "en\r\ndata: {\"delta\":", "\"Hé\"}\r", "\n\r\n",
    "data: line one\ndata: line two\n\n", "event: done\ndata: {}\n\n",
  ));
  assert.deepEqual(events, [
    { name: "token", data: '{"delta":"Hé"}' },
    { name: "message", data: "line one\nline two" },
    { name: "done", data: "{}" },
  ]);
});

test("a multi-byte character cut between chunks is decoded whole", async () => {
  const bytes = new TextEncoder().encode("event: token\ndata: Tromsø\n\n");
  const cut = bytes.indexOf(0xc3) + 1;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(bytes.slice(0, cut));
      controller.enqueue(bytes.slice(cut));
      controller.close();
    },
  });
  assert.deepEqual(await collect(stream), [{ name: "token", data: "Tromsø" }]);
});
