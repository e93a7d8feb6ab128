// make bench-langgraph: one StateGraph turn (a user message, an agent message, two small
// channels) persisted through CscpSaver and through LangGraph's PostgresSaver on the same cluster,
// alternated, for threads at turns 1-50 and 201-250, with 1, 4 and 16 concurrent threads:
// turns per second, p99 latency, WAL bytes per turn.  Environment: PGHOST/PGPORT/PGUSER (a
// superuser) of a throwaway cluster where cscp is installed (test/scripts/bench_langgraph.sh).
import pg from "pg";
import { Annotation, StateGraph, START, END } from "@langchain/langgraph";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { CscpSaver } from "../dist/index.js";

const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,4,16").split(",").map(Number);
const FILL = Number(process.env.BENCH_FILL ?? 200);   // turns before the second measured window
const WINDOW = Number(process.env.BENCH_WINDOW ?? 50);

const State = Annotation.Root({
  messages: Annotation({ reducer: (a, b) => a.concat(b), default: () => [] }),
  step: Annotation(),
  mood: Annotation(),
});

function buildGraph(checkpointer) {
  return new StateGraph(State)
    .addNode("agent", (s) => ({ messages: [{ role: "ai", content: `reply ${s.messages.length}: noted, thank you` }],
      step: s.messages.length, mood: s.messages.length % 2 ? "calm" : "busy" }))
    .addEdge(START, "agent").addEdge("agent", END)
    .compile({ checkpointer });
}

const admin = new pg.Pool({ max: 2 });
async function walLsn() {
  return (await admin.query("SELECT pg_catalog.pg_current_wal_insert_lsn()::text AS l")).rows[0].l;
}
async function walBytes(from, to) {
  return Number((await admin.query("SELECT pg_catalog.pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn) AS d", [from, to])).rows[0].d);
}

await admin.query(`DO $$ BEGIN CREATE ROLE bench_cscp LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("SELECT cscp.grant_app('bench_cscp', '{bench}')");
await admin.query(`DO $$ BEGIN CREATE ROLE bench_peer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
await admin.query("CREATE SCHEMA IF NOT EXISTS peer AUTHORIZATION bench_peer");
// PostgresSaver.setup() runs CREATE SCHEMA IF NOT EXISTS, which asks for CREATE on the database.
await admin.query("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO bench_peer', current_database()); END $$");

const maxC = Math.max(...CONCURRENCY);
const cscpPool = new pg.Pool({ user: "bench_cscp", max: maxC });
const peerPool = new pg.Pool({ user: "bench_peer", max: maxC });
const savers = {
  cscp: new CscpSaver(cscpPool, { tenant: "bench" }),
  peer: new PostgresSaver(peerPool, undefined, { schema: "peer" }),
};
await savers.cscp.setup();
await savers.peer.setup();
const graphs = { cscp: buildGraph(savers.cscp), peer: buildGraph(savers.peer) };

/** turns turns on each of threads, concurrently; latencies in ms */
async function runTurns(name, threads, turns, latencies) {
  await Promise.all(threads.map(async (thread) => {
    for (let t = 0; t < turns; t++) {
      const start = performance.now();
      await graphs[name].invoke({ messages: [{ role: "user", content: `message ${t} about order 42` }] },
        { configurable: { thread_id: thread } });
      latencies?.push(performance.now() - start);
    }
  }));
}

function p99(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)];
}

async function measure(name, threads) {
  const latencies = [];
  const from = await walLsn();
  const start = performance.now();
  await runTurns(name, threads, WINDOW, latencies);
  const secs = (performance.now() - start) / 1000;
  const wal = await walBytes(from, await walLsn());
  const n = threads.length * WINDOW;
  return { tps: n / secs, p99: p99(latencies), walPerTurn: wal / n };
}

// Warm both up (Node's JIT, the connections, the plans) before anything is measured, so that the
// saver measured first does not pay for it.
await Promise.all(["cscp", "peer"].map((name) => runTurns(name, ["warm-up"], 20)));

const results = [];
let run = 0;
for (const c of CONCURRENCY) {
  run++;
  const threads = { cscp: [], peer: [] };
  for (const name of ["cscp", "peer"]) {
    for (let i = 0; i < c; i++) threads[name].push(`r${run}-c${c}-t${i}`);
  }
  // turns 1-50, alternated: cscp then the peer
  const early = {};
  for (const name of ["cscp", "peer"]) early[name] = await measure(name, threads[name]);
  // turns 51-200, not measured, alternated in halves
  for (const name of ["cscp", "peer"]) await runTurns(name, threads[name], FILL - WINDOW);
  const late = {};
  for (const name of ["peer", "cscp"]) late[name] = await measure(name, threads[name]);
  for (const [window, r] of [[`1-${WINDOW}`, early], [`${FILL + 1}-${FILL + WINDOW}`, late]]) {
    results.push({ threads: c, turns: window, ...Object.fromEntries(["cscp", "peer"].flatMap((n) => [
      [`${n}_tps`, r[n].tps], [`${n}_p99_ms`, r[n].p99], [`${n}_wal_per_turn`, r[n].walPerTurn]])) });
    const x = results.at(-1);
    console.log(`threads ${String(c).padStart(2)}  turns ${window.padEnd(7)}  ` +
      `cscp ${x.cscp_tps.toFixed(0).padStart(5)} turns/s p99 ${x.cscp_p99_ms.toFixed(1).padStart(6)} ms WAL ${x.cscp_wal_per_turn.toFixed(0).padStart(6)} B | ` +
      `PostgresSaver ${x.peer_tps.toFixed(0).padStart(5)} turns/s p99 ${x.peer_p99_ms.toFixed(1).padStart(6)} ms WAL ${x.peer_wal_per_turn.toFixed(0).padStart(6)} B | ` +
      `rate ${(x.cscp_tps / x.peer_tps).toFixed(2)}x, WAL ${(x.cscp_wal_per_turn / x.peer_wal_per_turn).toFixed(2)}x`);
  }
}
if (process.env.BENCH_JSON) {
  const { writeFileSync } = await import("node:fs");
  writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
}
await cscpPool.end();
await peerPool.end();
await admin.end();
