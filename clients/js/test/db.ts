// The test database: a cluster named by the libpq environment (PGHOST, PGPORT, PGUSER as a
// superuser), cscp installed there, and an application role the clients connect as.
import pg from "pg";
import { randomUUID } from "node:crypto";

export const APP_ROLE = "cscp_js_app";

let ready: Promise<void> | undefined;

/** Install cscp and the application role once per test run (idempotent). */
export function prepare(): Promise<void> {
  ready ??= (async () => {
    const admin = new pg.Client();
    await admin.connect();
    try {
      await admin.query("CREATE EXTENSION IF NOT EXISTS cscp");
      await admin.query(`DO $$ BEGIN CREATE ROLE ${APP_ROLE} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
      await admin.query("SELECT cscp.grant_app($1)", [APP_ROLE]);
    } finally {
      await admin.end();
    }
  })();
  return ready;
}

/** A pool of connections as the application role. */
export function appPool(max = 4): pg.Pool {
  return new pg.Pool({ user: APP_ROLE, max });
}

/** A pool of connections as the superuser of the environment. */
export function adminPool(): pg.Pool {
  return new pg.Pool({ max: 2 });
}

/** A tenant id no other test uses. */
export function freshTenant(prefix = "t"): string {
  return `${prefix}-${randomUUID().slice(0, 8)}`;
}

/** The connection string of the application role (for fromConnString and child processes). */
export function appConnString(): string {
  const host = process.env.PGHOST ?? "/var/run/postgresql";
  const port = process.env.PGPORT ?? "5432";
  const db = process.env.PGDATABASE ?? process.env.PGUSER ?? "postgres";
  return `postgresql://${APP_ROLE}@/${encodeURIComponent(db)}?host=${encodeURIComponent(host)}&port=${port}`;
}
