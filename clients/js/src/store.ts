// CscpStore: LangGraph's BaseStore on cscp (cscp.store_* in src/sql/checkpoint.sql): items under
// namespaces of one tenant, filters and a ranked text query evaluated in the database, TTL per
// item refreshed on read as LangGraph's TTLConfig describes.
import pg from "pg";
import {
  BaseStore,
  validateNamespace,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import { inTransaction, type Query } from "./call.js";

/** As LangGraph's TTLConfig: times in minutes. */
export interface CscpTTLConfig {
  /** The TTL of items put without one (minutes); none: items do not expire. */
  defaultTtl?: number;
  /** Whether get and search push an item's expiry back by its TTL (default true). */
  refreshOnRead?: boolean;
  /** Accepted for compatibility: expired items are never returned, and cscp.sweep removes them. */
  sweepIntervalMinutes?: number;
}

export interface CscpStoreOptions {
  /** The tenant every item of this store belongs to. */
  tenant: string;
  ttl?: CscpTTLConfig;
}

type PutOp = PutOperation & { ttl?: number | null };
type GetOp = GetOperation & { refreshTtl?: boolean };
type SearchOp = SearchOperation & { refreshTtl?: boolean };

interface ItemRow extends Record<string, unknown> {
  item_namespace: string[];
  item_key: string;
  item_value: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
  score?: number | null;
}

const minutes = (m: number) => `${m} minutes`;

/** A LangGraph store whose items live in cscp, bound to one tenant. */
export class CscpStore extends BaseStore {
  readonly pool: pg.Pool;
  readonly tenant: string;
  readonly ttlConfig?: CscpTTLConfig;
  private readonly ownsPool: boolean;

  constructor(pool: pg.Pool, options: CscpStoreOptions, ownsPool = false) {
    super();
    if (!options || typeof options.tenant !== "string" || options.tenant === "") {
      throw new TypeError("CscpStore needs a tenant: new CscpStore(pool, { tenant: \"acme\" })");
    }
    this.pool = pool;
    this.tenant = options.tenant;
    this.ttlConfig = options.ttl;
    this.ownsPool = ownsPool;
  }

  /** A store on a pool of its own, which end() closes. */
  static fromConnString(connectionString: string, options: CscpStoreOptions): CscpStore {
    return new CscpStore(new pg.Pool({ connectionString }), options, true);
  }

  /** Check that cscp, with its store functions, is installed in the database. */
  async setup(): Promise<void> {
    const rows = await inTransaction(this.pool, this.tenant, (q) => q<{ ok: boolean }>(
      "SELECT pg_catalog.to_regprocedure('cscp.store_put(text,text[],text,jsonb,interval)') IS NOT NULL AS ok"));
    if (!rows[0]?.ok) {
      throw new Error("cscp 0.2.0 or later is not installed in this database: run CREATE EXTENSION cscp (or ALTER EXTENSION cscp UPDATE)");
    }
  }

  /** Close the pool when this store made it. */
  async end(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  override async get(namespace: string[], key: string, options?: { refreshTtl?: boolean }): Promise<Item | null> {
    return (await this.batch([{ namespace, key, refreshTtl: options?.refreshTtl } as GetOp]))[0] as Item | null;
  }

  override async search(namespacePrefix: string[], options: {
    filter?: Record<string, any>; limit?: number; offset?: number; query?: string; refreshTtl?: boolean;
  } = {}): Promise<SearchItem[]> {
    const { filter, limit = 10, offset = 0, query, refreshTtl } = options;
    return (await this.batch([{ namespacePrefix, filter, limit, offset, query, refreshTtl } as SearchOp]))[0] as SearchItem[];
  }

  /** Store an item; options.ttl in minutes (null: never expires; default: the store's defaultTtl). */
  override async put(namespace: string[], key: string, value: Record<string, any>, index?: false | string[],
    options?: { ttl?: number | null }): Promise<void> {
    validateNamespace(namespace);
    await this.batch([{ namespace, key, value, index, ttl: options?.ttl } as PutOp]);
  }

  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    for (const op of operations) {
      if ("value" in op && "namespace" in op) validateNamespace((op as PutOp).namespace);
    }
    return inTransaction(this.pool, this.tenant, async (q) => {
      const results: unknown[] = [];
      for (const op of operations) {
        if ("namespacePrefix" in op) results.push(await this.searchOp(q, op as SearchOp));
        else if ("value" in op) results.push(await this.putOp(q, op as PutOp));
        else if ("key" in op) results.push(await this.getOp(q, op as GetOp));
        else results.push(await this.listOp(q, op as ListNamespacesOperation));
      }
      return results as OperationResults<Op>;
    });
  }

  private refresh(asked?: boolean): boolean {
    return asked ?? this.ttlConfig?.refreshOnRead ?? true;
  }

  private toItem(row: ItemRow): Item {
    return { namespace: row.item_namespace, key: row.item_key, value: row.item_value,
      createdAt: row.created_at, updatedAt: row.updated_at };
  }

  private async getOp(q: Query, op: GetOp): Promise<Item | null> {
    const rows = await q<ItemRow>("SELECT * FROM cscp.store_get($1, $2::text[], $3, $4)",
      [this.tenant, op.namespace, op.key, this.refresh(op.refreshTtl)]);
    return rows.length ? this.toItem(rows[0]) : null;
  }

  private async putOp(q: Query, op: PutOp): Promise<void> {
    if (op.value === null) {
      await q("SELECT cscp.store_delete($1, $2::text[], $3)", [this.tenant, op.namespace, op.key]);
      return;
    }
    const ttl = op.ttl === undefined ? this.ttlConfig?.defaultTtl : op.ttl;
    await q("SELECT cscp.store_put($1, $2::text[], $3, $4::jsonb, $5::interval)",
      [this.tenant, op.namespace, op.key, JSON.stringify(op.value), ttl === undefined || ttl === null ? null : minutes(ttl)]);
  }

  private async searchOp(q: Query, op: SearchOp): Promise<SearchItem[]> {
    const rows = await q<ItemRow>("SELECT * FROM cscp.store_search($1, $2::text[], $3::jsonb, $4, $5, $6, $7)",
      [this.tenant, op.namespacePrefix, op.filter && Object.keys(op.filter).length ? JSON.stringify(op.filter) : null,
        op.query || null, op.limit ?? 10, op.offset ?? 0, this.refresh(op.refreshTtl)]);
    return rows.map((row) => {
      const item: SearchItem = this.toItem(row);
      if (row.score !== null && row.score !== undefined) item.score = row.score;
      return item;
    });
  }

  private async listOp(q: Query, op: ListNamespacesOperation): Promise<string[][]> {
    const prefixes = (op.matchConditions ?? []).filter((c) => c.matchType === "prefix");
    const suffixes = (op.matchConditions ?? []).filter((c) => c.matchType === "suffix");
    if (prefixes.length > 1 || suffixes.length > 1) {
      throw new TypeError("listNamespaces takes at most one prefix and one suffix");
    }
    const rows = await q<{ ns: string[] }>(
      "SELECT n AS ns FROM cscp.store_list_namespaces($1, $2::text[], $3::text[], $4, $5, $6) n",
      [this.tenant, prefixes[0]?.path ?? null, suffixes[0]?.path ?? null, op.maxDepth ?? null, op.limit ?? 100, op.offset ?? 0]);
    return rows.map((r) => r.ns);
  }
}
