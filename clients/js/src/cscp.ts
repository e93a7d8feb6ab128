// Cscp: cscp's public SQL API as typed methods over a pg Pool.
import pg from "pg";
import { CscpApi } from "./api.js";
import { callSql, inTransaction, readResult, type Caller, type Query, type ResultKind } from "./call.js";

export interface CscpOptions {
  /** The tenant of calls that do not name one (their tenant_id argument). */
  tenant?: string;
}

/**
 * Every public function of cscp as a method taking its arguments by name, e.g.
 * `await cscp.contextOpen({ tenant_id: "acme", conversation_id: "c-1", actor_id: "u-1" })`.
 * Each call runs in a transaction of its own with `SET LOCAL cscp.tenant_id` to the call's
 * tenant_id (or the Cscp's tenant), so an application role bound to tenants acts for the right
 * one; errors are CscpError with the SQLSTATE, message, detail and hint.
 */
export class Cscp extends CscpApi {
  readonly pool: pg.Pool;
  readonly tenant?: string;
  private readonly ownsPool: boolean;

  constructor(pool: pg.Pool, options: CscpOptions = {}, ownsPool = false) {
    const caller: Caller = {
      call: (fn, params, args, kind) => this.callFunction(fn, params, args, kind),
    };
    super(caller);
    this.pool = pool;
    this.tenant = options.tenant;
    this.ownsPool = ownsPool;
  }

  /** A Cscp on a pool of its own (closed by end()). */
  static fromConnString(connectionString: string, options: CscpOptions = {}): Cscp {
    return new Cscp(new pg.Pool({ connectionString }), options, true);
  }

  /** Run fn in one transaction for tenant (default: the Cscp's), with a query function. */
  transaction<T>(fn: (q: Query) => Promise<T>, tenant: string | undefined = this.tenant): Promise<T> {
    return inTransaction(this.pool, tenant, fn);
  }

  /** Close the pool when this Cscp made it. */
  async end(): Promise<void> {
    if (this.ownsPool) await this.pool.end();
  }

  private async callFunction(fn: string, params: [string, string][], args: Record<string, unknown>, kind: ResultKind): Promise<unknown> {
    const hasTenant = params.some(([name]) => name === "tenant_id");
    const full = hasTenant && args.tenant_id === undefined && this.tenant !== undefined ? { ...args, tenant_id: this.tenant } : args;
    const tenant = (hasTenant ? (full.tenant_id as string | undefined) : undefined) ?? this.tenant;
    const { sql, values } = callSql(fn, params, full, kind);
    const rows = await this.transaction((q) => q(sql, values), tenant ?? undefined);
    return readResult(rows, kind);
  }
}
