// BENCH_PROFILE=1 make bench-langgraph: what one turn of the benchmark's StateGraph costs per
// saver, on one thread after BENCH_FILL turns: wall and Node CPU time, the saver's calls, the
// statements sent, the transactions committed, and (pg_stat_statements, track = all) the
// server's execution and planning time per statement.  Environment as for langgraph.mjs, with
// pg_stat_statements loaded (test/scripts/bench_langgraph.sh starts the cluster so).
import pg from "pg";
import { buildGraph } from "./graph.mjs";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { CscpSaver } from "../dist/index.js";

const FILL = Number(process.env.BENCH_FILL ?? 200);
const TURNS = Number(process.env.BENCH_PROFILE_TURNS ?? 50);
const TOP = Number(process.env.BENCH_PROFILE_TOP ?? 8);

const admin = new pg.Pool({ max: 1 });
await admin.query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
await admin.query(`DO $$ BEGIN CREATE ROLE bench_cscp LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("SELECT cscp.grant_app('bench_cscp', '{bench}')");
await admin.query(`DO $$ BEGIN CREATE ROLE bench_peer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("CREATE SCHEMA IF NOT EXISTS peer AUTHORIZATION bench_peer");
await admin.query("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO bench_peer', current_database()); END $$");

// Statements and transactions of the savers' connections (the admin pool's are not counted): a
// statement outside BEGIN ... COMMIT is a transaction of its own.
let sent = 0;
let transactions = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (...args) {
  if (this.connectionParameters.user !== process.env.PGUSER) {
    const text = typeof args[0] === "string" ? args[0] : args[0]?.text ?? "";
    sent++;
    if (/^\s*BEGIN/i.test(text)) {
      this.inBlock = true;
      transactions++;
    } else if (/^\s*(COMMIT|ROLLBACK)/i.test(text)) {
      this.inBlock = false;
    } else if (!this.inBlock) {
      transactions++;
    }
  }
  return query.apply(this, args);
};

for (const name of ["memory", "cscp", "peer"]) {
  const pool = name === "memory" ? null : new pg.Pool({ user: `bench_${name}`, max: 2 });
  const saver = name === "cscp" ? new CscpSaver(pool, { tenant: "bench" })
    : name === "peer" ? new PostgresSaver(pool, undefined, { schema: "peer" }) : new MemorySaver();
  if (name !== "memory") await saver.setup();
  const calls = {};
  for (const m of ["getTuple", "list", "put", "putWrites"]) {
    const f = saver[m].bind(saver);
    saver[m] = (...args) => { calls[m] = (calls[m] ?? 0) + 1; return f(...args); };
  }
  const graph = buildGraph(saver);
  const thread = `profile-${name}`;
  const turn = (t) => graph.invoke({ messages: [{ role: "user", content: `message ${t} about order 42` }] },
    { configurable: { thread_id: thread } });
  for (let t = 0; t < FILL; t++) await turn(t);
  for (const k of Object.keys(calls)) delete calls[k];
  sent = 0;
  transactions = 0;
  await admin.query("SELECT pg_stat_statements_reset()");
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let t = FILL; t < FILL + TURNS; t++) await turn(t);
  const wall = (performance.now() - t0) / TURNS;
  const cpu = process.cpuUsage(cpu0);
  const per = (x) => (x / TURNS).toFixed(2);
  console.log(`${name.padEnd(6)} turn ${FILL + 1}-${FILL + TURNS}: ${wall.toFixed(1)} ms, Node CPU ${per((cpu.user + cpu.system) / 1000)} ms, ` +
    `saver calls ${Object.entries(calls).map(([k, v]) => `${k} ${per(v)}`).join(", ")}; ` +
    `statements ${per(sent)}, transactions ${per(transactions)}`);
  if (name === "memory") continue;
  const { rows } = await admin.query(
    `SELECT pg_catalog.sum(total_exec_time) FILTER (WHERE toplevel) AS exec, pg_catalog.sum(total_plan_time) AS plan
       FROM pg_stat_statements WHERE userid = $1::regrole`, [`bench_${name}`]);
  console.log(`       server per turn: execution ${per(rows[0].exec)} ms, planning ${per(rows[0].plan)} ms`);
  const top = await admin.query(
    `SELECT calls, total_exec_time AS exec, total_plan_time AS plan, toplevel,
            pg_catalog.left(pg_catalog.regexp_replace(query, '\\s+', ' ', 'g'), 90) AS q
       FROM pg_stat_statements WHERE userid = $1::regrole AND query !~ '^(BEGIN|COMMIT)'
      ORDER BY total_exec_time DESC LIMIT $2`, [`bench_${name}`, TOP]);
  for (const r of top.rows) {
    console.log(`       ${per(r.calls).padStart(5)} x ${per(r.exec).padStart(6)} ms exec ${per(r.plan).padStart(5)} ms plan ` +
      `${r.toplevel ? "top   " : "nested"} ${r.q}`);
  }
  await pool.end();
}
await admin.end();
