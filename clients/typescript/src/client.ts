/**
 * `MemwellClient`: the TypeScript client of the Memwell REST API, the same surface
 * as the Python SDK's `MemoryClient`.
 *
 *     const mw = new MemwellClient({ baseUrl: "http://localhost:8420", apiKey: "mw_..." });
 *     const reply = await mw.chat({ user_id: "u1", session_id: "s1", message: "I moved to Lisbon." });
 *     for await (const event of mw.chatStream({ user_id: "u1", session_id: "s1", message: "Where do I live?" })) {
 *       if (event.event === "token") process.stdout.write(event.delta);
 *     }
 *
 * Request and answer shapes are the API's, generated from its OpenAPI document.
 * Errors are `APIError` subclasses mapped from problem+json (see ./errors.ts);
 * retries follow the policy in ./transport.ts.
 */

import { randomUUID } from "node:crypto";

import { type ChatStreamEvent, chatEvents } from "./sse.js";
import { type Call, type ClientOptions, seg, Transport } from "./transport.js";
import type {
  AddedMemory, AddMemoriesRequest, AddResult, ChatRequest, ChatResponse, ContextRequest,
  ContextResponse, EditResult, ErasureReceipt, ListMemoriesQuery, MemoryHistory, MemoryPage,
  MemoryPatch, MemoryRecord, NewMemory, PageQuery, ProfileQuery, SearchRequest,
  SearchResponse, SessionDeletion, SessionDetail, SessionPage, TurnIn, TurnsAccepted,
  TurnStatus, UserDetail, UserPage, UserProfile,
} from "./types.js";

const DONE_STATES = new Set(["processed", "failed", "dropped"]);

/** Per call: an abort signal, and for a write the Idempotency-Key to send. */
export interface CallOptions {
  signal?: AbortSignal;
  idempotencyKey?: string;
}

export class MemwellClient {
  private readonly transport: Transport;

  constructor(options: ClientOptions = {}) {
    this.transport = new Transport(options);
  }

  get baseUrl(): string {
    return this.transport.baseUrl;
  }

  private run<T>(call: Call, options: CallOptions = {}): Promise<T> {
    return this.transport.json<T>({ ...call, ...options });
  }

  // --- chat through Memwell -----------------------------------------------------------

  /** A reply grounded in the session buffer and long-term memory; the exchange is
   * remembered. Not retried once sent (a second try would ask the model twice). */
  chat(request: ChatRequest, options?: CallOptions): Promise<ChatResponse> {
    return this.run({ method: "POST", path: "/v1/chat", body: { ...request, stream: false }, retryable: false }, options);
  }

  /** `chat`, as the reply is produced: `memories`, then `token` events, then `done`.
   * A failure mid-way throws the mapped APIError; breaking out of the loop hangs up,
   * and what was produced so far is remembered. */
  async *chatStream(request: ChatRequest, options: CallOptions = {}): AsyncGenerator<ChatStreamEvent> {
    const response = await this.transport.send({
      method: "POST", path: "/v1/chat", body: { ...request, stream: true }, retryable: false,
      stream: true, ...options,
    });
    if (!response.body) return;
    yield* chatEvents(response.body, response.headers.get("X-Request-ID") ?? undefined);
  }

  // --- memory for your own model loop -------------------------------------------------

  /** Enqueue up to 500 turns for consolidation, all or nothing. A turn without an id
   * gets one here, so the batch may be retried: the server stores each id once. */
  addTurns(turns: TurnIn[], options?: CallOptions): Promise<TurnsAccepted> {
    const withIds = turns.map((turn) => ({ ...turn, id: turn.id ?? randomUUID().replaceAll("-", "") }));
    return this.run({ method: "POST", path: "/v1/turns", body: { turns: withIds }, retryable: true }, options);
  }

  /** Enqueue one turn; its id. */
  async addTurn(turn: TurnIn, options?: CallOptions): Promise<string> {
    const accepted = await this.addTurns([turn], options);
    return accepted.turn_ids[0] as string;
  }

  /** pending, processed, failed, dropped, or unknown (not persisted yet). */
  turnStatus(turnId: string, options?: CallOptions): Promise<TurnStatus> {
    return this.run({ method: "GET", path: `/v1/turns/${seg(turnId)}`, retryable: true }, options);
  }

  /** Poll until every turn is consolidated (or failed or dropped); rejects after `timeoutMs`. */
  async waitForTurns(
    turnIds: readonly string[],
    { timeoutMs = 60_000, pollMs = 250 }: { timeoutMs?: number; pollMs?: number } = {},
  ): Promise<TurnStatus[]> {
    const deadline = Date.now() + timeoutMs;
    const done = new Map<string, TurnStatus>();
    let pending = [...turnIds];
    while (pending.length) {
      for (const id of pending) {
        const status = await this.turnStatus(id);
        if (DONE_STATES.has(status.status)) done.set(id, status);
      }
      pending = pending.filter((id) => !done.has(id));
      if (!pending.length) break;
      if (Date.now() > deadline) {
        throw new Error(`${pending.length} turns still pending after ${timeoutMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
    return turnIds.map((id) => done.get(id) as TurnStatus);
  }

  /** Memories for a query, best first, each with its score parts. */
  search(request: SearchRequest, options?: CallOptions): Promise<SearchResponse> {
    return this.run({ method: "POST", path: "/v1/memories/search", body: request, retryable: true }, options);
  }

  /** Ready-to-use context for your own model call: memories as quoted data, the
   * session summary and the recent buffer, inside a token budget. */
  context(request: ContextRequest, options?: CallOptions): Promise<ContextResponse> {
    return this.run({ method: "POST", path: "/v1/context", body: request, retryable: true }, options);
  }

  // --- memories -----------------------------------------------------------------------

  /** One page of the user's memories, with the total; pass `next_cursor` back as `cursor`. */
  listMemories(query: ListMemoriesQuery, options?: CallOptions): Promise<MemoryPage> {
    return this.run({ method: "GET", path: "/v1/memories", query, retryable: true }, options);
  }

  getMemory(memoryId: string, options?: CallOptions): Promise<MemoryRecord> {
    return this.run({ method: "GET", path: `/v1/memories/${seg(memoryId)}`, retryable: true }, options);
  }

  /** Store up to 500 memories directly (a string is a fact's content). With
   * `reconcile` (the default), each is deduplicated, merged or supersedes as
   * consolidation would. Not retried once sent: a reconciled add run twice reinforces twice. */
  addMemories(
    request: Omit<AddMemoriesRequest, "memories"> & { memories: (NewMemory | string)[] },
    options?: CallOptions,
  ): Promise<AddResult> {
    const memories = request.memories.map((m) => (typeof m === "string" ? { content: m } : m));
    return this.run({ method: "POST", path: "/v1/memories", body: { ...request, memories }, retryable: false }, options);
  }

  /** Store one memory directly; what became of it. */
  async addMemory(
    request: { user_id: string; reconcile?: boolean } & NewMemory,
    options?: CallOptions,
  ): Promise<AddedMemory> {
    const { user_id, reconcile, ...memory } = request;
    const added = await this.addMemories({ user_id, memories: [memory], ...(reconcile === undefined ? {} : { reconcile }) }, options);
    return added.results[0] as AddedMemory;
  }

  /** Change content, kind, importance, metadata, pinned or expires_at (null clears an
   * expiry). New content is re-embedded; `collisions` lists what it now comes close to. */
  editMemory(memoryId: string, changes: MemoryPatch, options?: CallOptions): Promise<EditResult> {
    return this.run({ method: "PATCH", path: `/v1/memories/${seg(memoryId)}`, body: changes, retryable: true }, options);
  }

  /** Tombstone one memory; the tombstone (deleted_at set, content redacted). */
  deleteMemory(memoryId: string, options?: CallOptions): Promise<MemoryRecord> {
    return this.run({ method: "DELETE", path: `/v1/memories/${seg(memoryId)}`, retryable: true }, options);
  }

  /** Every change to the memory (add, reinforce, merge, supersede, update, delete), oldest first. */
  memoryHistory(memoryId: string, options?: CallOptions): Promise<MemoryHistory> {
    return this.run({ method: "GET", path: `/v1/memories/${seg(memoryId)}/history`, retryable: true }, options);
  }

  // --- sessions and users -------------------------------------------------------------

  /** The user's sessions, most recently active first. */
  listSessions(query: { user_id: string } & PageQuery, options?: CallOptions): Promise<SessionPage> {
    return this.run({ method: "GET", path: "/v1/sessions", query, retryable: true }, options);
  }

  /** A session's status, running summary, buffered turns and turn ids. */
  getSession(sessionId: string, query: { user_id: string }, options?: CallOptions): Promise<SessionDetail> {
    return this.run({ method: "GET", path: `/v1/sessions/${seg(sessionId)}`, query, retryable: true }, options);
  }

  /** Fold what is left into the session's summary now, as the idle job would. */
  closeSession(sessionId: string, query: { user_id: string }, options?: CallOptions): Promise<SessionDetail> {
    return this.run({ method: "POST", path: `/v1/sessions/${seg(sessionId)}/close`, query, retryable: true }, options);
  }

  /** Delete a session's buffer, summary and turns (and with `with_memories`, the
   * memories it produced); counts per store. Needs an admin-scoped key. */
  deleteSession(
    sessionId: string,
    query: { user_id: string; with_memories?: boolean },
    options?: CallOptions,
  ): Promise<SessionDeletion> {
    return this.run({ method: "DELETE", path: `/v1/sessions/${seg(sessionId)}`, query, retryable: true }, options);
  }

  /** The tenant's users with their memory and session counts. */
  listUsers(query: PageQuery = {}, options?: CallOptions): Promise<UserPage> {
    return this.run({ method: "GET", path: "/v1/users", query, retryable: true }, options);
  }

  /** One user's counts by kind, pending turns and last consolidation. */
  getUser(userId: string, options?: CallOptions): Promise<UserDetail> {
    return this.run({ method: "GET", path: `/v1/users/${seg(userId)}`, retryable: true }, options);
  }

  /** Erase everything about a user; the receipt with counts per store. Needs an admin-scoped key. */
  eraseUser(userId: string, options?: CallOptions): Promise<ErasureReceipt> {
    return this.run({ method: "DELETE", path: `/v1/users/${seg(userId)}`, retryable: true }, options);
  }

  /** The user's current single-valued facts by entity, and their most mentioned
   * entities with current relations. */
  getProfile(userId: string, query: ProfileQuery = {}, options?: CallOptions): Promise<UserProfile> {
    return this.run({ method: "GET", path: `/v1/users/${seg(userId)}/profile`, query, retryable: true }, options);
  }

  /** True when the API and its database and broker answer. */
  async ready(options?: CallOptions): Promise<boolean> {
    const body = await this.run<{ status?: string }>({ method: "GET", path: "/readyz", retryable: true }, options);
    return body?.status === "ready";
  }
}
