// The one path every call takes: a pooled connection, one transaction, the tenant named with
// SET LOCAL cscp.tenant_id, errors turned into CscpError.
import type pg from "pg";

/** A JSON value as cscp's jsonb arguments and results hold it. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json } | Record<string, unknown> | unknown[];

/** An error raised by the database, with its SQLSTATE (cscp's are listed in its README). */
export class CscpError extends Error {
  /** The SQLSTATE, e.g. "22023" for bad input, "42501" for another tenant, "55000" for a forgotten id. */
  readonly sqlstate: string;
  readonly detail?: string;
  readonly hint?: string;
  constructor(message: string, sqlstate: string, detail?: string, hint?: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "CscpError";
    this.sqlstate = sqlstate;
    this.detail = detail;
    this.hint = hint;
  }
  /** The error as a CscpError when it came from the database; other errors unchanged. */
  static from(err: unknown): unknown {
    if (err instanceof CscpError) return err;
    const e = err as { code?: unknown; message?: string; detail?: string; hint?: string; severity?: unknown };
    if (e && typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code) && e.severity !== undefined) {
      return new CscpError(e.message ?? "database error", e.code, e.detail || undefined, e.hint || undefined, { cause: err });
    }
    return err;
  }
}

/** A statement runner inside one transaction of one tenant. */
export type Query = <R extends Record<string, unknown> = Record<string, unknown>>(sql: string, params?: unknown[]) => Promise<R[]>;

/** How a generated method's result is read. */
export type ResultKind = "rows" | "row" | "values" | "value" | "void";

/** What the generated API calls. */
export interface Caller {
  call(fn: string, params: [string, string][], args: Record<string, unknown>, kind: ResultKind): Promise<unknown>;
}

const quoteIdent = (s: string) => `"${s.replace(/"/g, '""')}"`;

/** A value as the parameter of a declared type: JSON text for json and jsonb. */
function encode(type: string, value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (type === "jsonb" || type === "json") return JSON.stringify(value);
  return value;
}

/** Run fn in one transaction with cscp.tenant_id set for it (when tenant is given). */
export async function inTransaction<T>(pool: pg.Pool, tenant: string | undefined, fn: (q: Query) => Promise<T>): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw CscpError.from(err);
  }
  let broken = false;
  try {
    await client.query("BEGIN");
    if (tenant !== undefined && tenant !== null) {
      await client.query("SELECT pg_catalog.set_config('cscp.tenant_id', $1, true)", [tenant]);
    }
    const q: Query = async (sql, params) => (await client.query(sql, params as unknown[])).rows as never;
    const result = await fn(q);
    await client.query("COMMIT");
    return result;
  } catch (err) {
    try {
      await client.query("ROLLBACK");
    } catch {
      broken = true;
    }
    throw CscpError.from(err);
  } finally {
    client.release(broken);
  }
}

/**
 * Run one statement for tenant in a single round trip: the statement is its own transaction, and
 * the tenant is set for it with set_config(..., true) (SET LOCAL) in a subquery whose value,
 * `s.t`, the statement passes as its tenant_id: the data dependency makes the setting come first.
 * `body` is a SELECT naming the tenant as s.t and its parameters from $2.  With a name, the
 * statement is prepared once per connection under that name (one name, one body), so that a
 * call on the hot path is neither parsed nor planned again.
 */
export async function tenantQuery<R extends Record<string, unknown> = Record<string, unknown>>(
  pool: pg.Pool, tenant: string, body: string, params: unknown[] = [], name?: string): Promise<R[]> {
  try {
    const text = `SELECT r.* FROM (SELECT pg_catalog.set_config('cscp.tenant_id', $1, true) AS t) s CROSS JOIN LATERAL (${body}) r`;
    const values = [tenant, ...params];
    const res = await (name === undefined ? pool.query(text, values) : pool.query({ name, text, values }));
    return res.rows as R[];
  } catch (err) {
    throw CscpError.from(err);
  }
}

/** The SQL of a call of cscp.fn with the given arguments by name, each cast to its declared type. */
export function callSql(fn: string, params: [string, string][], args: Record<string, unknown>, kind: ResultKind): { sql: string; values: unknown[] } {
  const values: unknown[] = [];
  const parts: string[] = [];
  for (const [name, type] of params) {
    if (args[name] === undefined) continue;
    values.push(encode(type, args[name]));
    parts.push(`${quoteIdent(name)} => $${values.length}::${type}`);
  }
  const call = `cscp.${quoteIdent(fn)}(${parts.join(", ")})`;
  const sql = kind === "rows" || kind === "row" ? `SELECT * FROM ${call}` : `SELECT ${call} AS v`;
  return { sql, values };
}

/** Read a call's rows as its kind says. */
export function readResult(rows: Record<string, unknown>[], kind: ResultKind): unknown {
  switch (kind) {
    case "rows":
      return rows;
    case "row":
      return rows[0] ?? null;
    case "values":
      return rows.map((r) => r.v);
    case "value":
      return rows[0]?.v ?? null;
    default:
      return undefined;
  }
}
