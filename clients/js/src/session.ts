// CscpSession: an OpenAI Agents SDK session (getItems, addItems, popItem, clearSession) on cscp
// (cscp.session_* in src/sql/checkpoint.sql), whose head row numbers the items so that
// concurrent writers, the first ones of a session included, never lose one.
import pg from "pg";
import type { AgentInputItem, Session } from "@openai/agents";
import { tenantQuery } from "./call.js";

/** An item of a session as the Agents SDK passes it: its AgentInputItem, stored as JSON. */
export type SessionItem = AgentInputItem;

export interface CscpSessionOptions {
  /** The tenant the session belongs to. */
  tenant: string;
}

/** The Session interface of @openai/agents, implemented on cscp. */
export class CscpSession implements Session {
  readonly pool: pg.Pool;
  readonly tenant: string;
  readonly sessionId: string;

  constructor(sessionId: string, pool: pg.Pool, options: CscpSessionOptions) {
    if (typeof sessionId !== "string" || sessionId === "") throw new TypeError("CscpSession needs a session id");
    if (!options || typeof options.tenant !== "string" || options.tenant === "") {
      throw new TypeError("CscpSession needs a tenant: new CscpSession(id, pool, { tenant: \"acme\" })");
    }
    this.sessionId = sessionId;
    this.pool = pool;
    this.tenant = options.tenant;
  }

  async getSessionId(): Promise<string> {
    return this.sessionId;
  }

  /** The session's items, oldest first; with limit, the latest limit of them. */
  async getItems(limit?: number): Promise<SessionItem[]> {
    // As the SDK's MemorySession: no positive limit, no items.
    if (limit !== undefined && limit !== null && !(limit > 0)) return [];
    const rows = await tenantQuery<{ item: SessionItem }>(this.pool, this.tenant,
      "SELECT i AS item FROM cscp.session_get_items(s.t, $2, $3) i", [this.sessionId, limit ?? null]);
    return rows.map((r) => r.item);
  }

  /** Append items, atomically. */
  async addItems(items: SessionItem[]): Promise<void> {
    if (items.length === 0) return;
    await tenantQuery(this.pool, this.tenant,
      "SELECT cscp.session_add_items(s.t, $2, $3::jsonb)", [this.sessionId, JSON.stringify(items)]);
  }

  /** Remove and return the latest item (undefined when there is none). */
  async popItem(): Promise<SessionItem | undefined> {
    const rows = await tenantQuery<{ item: SessionItem | null }>(this.pool, this.tenant,
      "SELECT cscp.session_pop_item(s.t, $2) AS item", [this.sessionId]);
    return rows[0]?.item ?? undefined;
  }

  /** Delete the session and all its items. */
  async clearSession(): Promise<void> {
    await tenantQuery(this.pool, this.tenant, "SELECT cscp.session_clear(s.t, $2)", [this.sessionId]);
  }
}
