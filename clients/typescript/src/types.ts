/**
 * Names for the generated OpenAPI types (./schema.ts, made by `npm run generate`), and
 * the request shapes the client takes: the API's own, with fields the server defaults
 * made optional.
 */

import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
/** `T` with the keys `K` optional (fields the server fills with a default). */
type Defaulted<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;

export type ChatRequest = Omit<Schemas["ChatRequest"], "stream">;
export type ChatResponse = Schemas["ChatResponse"];
export type TurnIn = Defaulted<Schemas["TurnIn"], "role">;
export type TurnsAccepted = Schemas["TurnBatchAccepted"];
export type TurnStatus = Schemas["TurnStatus"];
export type SearchRequest = Schemas["SearchRequest"];
export type SearchResponse = Schemas["SearchResponse"];
export type MemoryHit = Schemas["MemoryHit"];
export type ContextRequest = Defaulted<Schemas["ContextRequest"], "include_profile">;
export type ContextResponse = Schemas["ContextResponse"];
export type MemoryRecord = Schemas["MemoryRecord"];
export type MemoryPage = Schemas["MemoryPage"];
export type ListMemoriesQuery = paths["/v1/memories"]["get"]["parameters"]["query"];
export type NewMemory = Defaulted<Schemas["NewMemory"], "kind" | "pinned">;
export type AddMemoriesRequest = Defaulted<Schemas["AddMemoriesRequest"], "reconcile"> & {
  memories: NewMemory[];
};
export type AddResult = Schemas["AddResult"];
export type AddedMemory = Schemas["AddedMemory"];
export type MemoryPatch = Schemas["MemoryPatch"];
export type EditResult = Schemas["EditResult"];
export type MemoryHistory = Schemas["MemoryHistory"];
export type HistoryEvent = Schemas["HistoryEvent"];
export type SessionPage = Schemas["SessionPage"];
export type SessionDetail = Schemas["SessionDetail"];
export type SessionDeletion = Schemas["SessionDeletion"];
export type UserPage = Schemas["UserPage"];
export type UserDetail = Schemas["UserDetail"];
export type ErasureReceipt = Schemas["ErasureReceiptPublic"];
export type UserProfile = Schemas["UserProfile"];
export type ProfileQuery = NonNullable<
  paths["/v1/users/{user_id}/profile"]["get"]["parameters"]["query"]
>;
export type PageQuery = { limit?: number; cursor?: string };
