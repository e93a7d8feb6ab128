// BENCH_WAL=1 make bench-langgraph: where a turn's WAL goes.  The turn of bench/langgraph.mjs on
// one thread per saver (CscpSaver, PostgresSaver), BENCH_FILL turns (0) and then BENCH_WINDOW
// measured turns (50) after a CHECKPOINT; the records between the window's two LSNs, read with
// pg_waldump (PG_BINDIR, PGWAL: the cluster's pg_wal), are summed per table (its heap and index
// records) and per turn.  Full-page images are counted apart; a catalog's records (pruning after
// the setup's DDL) are left out.
import { execFileSync } from "node:child_process";
import pg from "pg";
import { buildGraph } from "./graph.mjs";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { CscpSaver } from "../dist/index.js";

const FILL = Number(process.env.BENCH_FILL ?? 0);
const WINDOW = Number(process.env.BENCH_WINDOW ?? 50);
const admin = new pg.Pool({ max: 1 });
await admin.query(`DO $$ BEGIN CREATE ROLE bench_cscp LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("SELECT cscp.grant_app('bench_cscp', '{bench}')");
await admin.query(`DO $$ BEGIN CREATE ROLE bench_peer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("CREATE SCHEMA IF NOT EXISTS peer AUTHORIZATION bench_peer");
await admin.query("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO bench_peer', current_database()); END $$");
const cscpPool = new pg.Pool({ user: "bench_cscp", max: 1 });
const peerPool = new pg.Pool({ user: "bench_peer", max: 1 });
const savers = { cscp: new CscpSaver(cscpPool, { tenant: "bench" }), peer: new PostgresSaver(peerPool, undefined, { schema: "peer" }) };
for (const s of Object.values(savers)) await s.setup();
const lsn = async () => (await admin.query("SELECT pg_catalog.pg_current_wal_insert_lsn()::text AS l")).rows[0].l;
const turn = (graph, thread, t) => graph.invoke({ messages: [{ role: "user", content: `message ${t} about order 42` }] },
  { configurable: { thread_id: thread } });

const windows = {};
for (const [name, saver] of Object.entries(savers)) {
  const graph = buildGraph(saver);
  for (let t = 0; t < FILL; t++) await turn(graph, `wal-${name}`, t);
  await admin.query("CHECKPOINT");
  const from = await lsn();
  for (let t = FILL; t < FILL + WINDOW; t++) await turn(graph, `wal-${name}`, t);
  windows[name] = [from, await lsn()];
}
// relfilenode -> table (an index or TOAST relation counts for its table)
const { rows } = await admin.query(
  `SELECT c.relfilenode::text AS node, n.nspname, coalesce(t.relname, c.relname) AS tab
     FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     LEFT JOIN pg_catalog.pg_index i ON i.indexrelid = c.oid
     LEFT JOIN pg_catalog.pg_class t ON t.oid = i.indrelid
    WHERE n.nspname IN ('cscp', 'peer') AND c.relfilenode <> 0`);
const table = new Map(rows.map((r) => [r.node, `${r.nspname}.${r.tab}`]));
for (const [name, [from, to]] of Object.entries(windows)) {
  const dump = execFileSync(`${process.env.PG_BINDIR}/pg_waldump`, ["-p", process.env.PGWAL, "-s", from, "-e", to],
    { encoding: "utf8", maxBuffer: 1 << 30 });
  const bytes = new Map();
  let fpi = 0, other = 0;
  for (const line of dump.split("\n")) {
    const m = /len \(rec\/tot\):\s*(\d+)\/\s*(\d+)/.exec(line);
    if (!m) continue;
    const total = Number(m[2]);
    const rel = /blkref #0: rel \d+\/\d+\/(\d+)/.exec(line);
    const key = rel ? table.get(rel[1]) : /rmgr: Transaction/.test(line) ? "commits" : undefined;
    if (key === undefined) { other += total; continue; }
    if (/FPW/.test(line)) fpi += total - Number(m[1]);
    bytes.set(key, (bytes.get(key) ?? 0) + total);
  }
  const per = (b) => Math.round(b / WINDOW).toLocaleString("en");
  const sum = [...bytes.values()].reduce((a, b) => a + b, 0);
  console.log(`${name}: turns ${FILL + 1}-${FILL + WINDOW}, one thread, WAL per turn ${per(sum)} B ` +
    `(full-page images ${per(fpi)} B of it; catalogs and others left out: ${per(other)} B)`);
  for (const [key, b] of [...bytes].sort((a, b) => b[1] - a[1])) console.log(`  ${key.padEnd(28)} ${per(b).padStart(7)} B`);
}
await cscpPool.end();
await peerPool.end();
await admin.end();
