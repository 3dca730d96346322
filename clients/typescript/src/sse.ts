/** The Server-Sent Events of a streamed chat, read as they arrive. */

import { problemError, type Problem } from "./errors.js";
import type { components } from "./schema.js";

type MemoryHit = components["schemas"]["MemoryHit"];

/** One event of a streamed chat: `memories` first, a `token` per piece of the reply,
 * then `done`. A failure mid-way is thrown as the mapped APIError instead (its
 * `body.turn_ids` name what was remembered). */
export type ChatStreamEvent =
  | { event: "memories"; memories: MemoryHit[] }
  | { event: "token"; delta: string }
  | { event: "done"; turn_ids: string[]; model: string; timings_ms: Record<string, number> };

interface RawEvent {
  name: string;
  data: string;
}

/** Raw events from a text/event-stream body, each once its closing blank line arrives. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<RawEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let name = "message";
  let data: string[] = [];
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A CR that ends the chunk may be the first half of a CRLF: wait for the next.
        if (!done && newline === buffer.length - 1 && buffer.endsWith("\r")) break;
        const line = buffer.slice(0, newline);
        buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
        if (line.startsWith(":")) continue; // a comment, e.g. a keep-alive
        if (line) {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") name = text;
          else if (field === "data") data.push(text);
          continue;
        }
        if (data.length) yield { name, data: data.join("\n") };
        name = "message";
        data = [];
      }
      if (done) return;
    }
  } finally {
    // Stopping early hangs up: the server keeps what was produced so far.
    await reader.cancel().catch(() => undefined);
  }
}

/** The chat's typed events; an `error` event is thrown as the mapped APIError. */
export async function* chatEvents(
  body: ReadableStream<Uint8Array>,
  requestId?: string,
): AsyncGenerator<ChatStreamEvent> {
  for await (const raw of readEvents(body)) {
    const data: unknown = JSON.parse(raw.data);
    const fields = (data !== null && typeof data === "object" ? data : {}) as Record<string, unknown>;
    switch (raw.name) {
      case "memories":
        yield { event: "memories", memories: data as MemoryHit[] };
        break;
      case "token":
        yield { event: "token", delta: String(fields.delta ?? "") };
        break;
      case "done":
        yield {
          event: "done",
          turn_ids: (fields.turn_ids ?? []) as string[],
          model: String(fields.model ?? ""),
          timings_ms: (fields.timings_ms ?? {}) as Record<string, number>,
        };
        break;
      case "error": {
        const problem = fields as Partial<Problem>;
        const status = typeof problem.status === "number" ? problem.status : 500;
        throw problemError(status, problem, {
          title: "the stream failed",
          ...(requestId ? { requestId } : {}),
        });
      }
      default:
        break; // an event this client does not know yet
    }
  }
}
