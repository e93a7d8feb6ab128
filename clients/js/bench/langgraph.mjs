// make bench-langgraph: one StateGraph turn (a user message, an agent message, two small
// channels) persisted through CscpSaver and through LangGraph's PostgresSaver on the same cluster,
// alternated, for threads at turns 1-50 and 201-250, with 1, 4 and 16 concurrent threads:
// turns per second, p99 latency, WAL bytes and Node CPU time per turn.  LangGraph's own MemorySaver runs the same
// graph and turns as a third column: the rate no database saver can reach in this harness.
// The threads are driven from N = min(threads, cores) worker threads (BENCH_WORKERS overrides
// the cores), each with its own event loop, pools and savers, so that one Node event loop is not
// the bottleneck; a thread always runs in the same worker, the same for every saver.
// Environment: PGHOST/PGPORT/PGUSER (a superuser) of a throwaway cluster where cscp is installed
// (test/scripts/bench_langgraph.sh).
import os from "node:os";
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";
import pg from "pg";
import { buildGraph } from "./graph.mjs";
import { MemorySaver } from "@langchain/langgraph-checkpoint";
import { PostgresSaver } from "@langchain/langgraph-checkpoint-postgres";
import { CscpSaver } from "../dist/index.js";

const SAVERS = ["cscp", "peer", "memory"];
const LABEL = { cscp: "cscp", peer: "PostgresSaver", memory: "MemorySaver" };

if (isMainThread) await main();
else await worker();

/** A worker: its own pools, savers and graphs; runs the turns it is sent and returns latencies. */
async function worker() {
  const { poolSize } = workerData;
  const cscpPool = new pg.Pool({ user: "bench_cscp", max: poolSize });
  const peerPool = new pg.Pool({ user: "bench_peer", max: poolSize });
  const graphs = {
    cscp: buildGraph(new CscpSaver(cscpPool, { tenant: "bench" })),
    peer: buildGraph(new PostgresSaver(peerPool, undefined, { schema: "peer" })),
    memory: buildGraph(new MemorySaver()),
  };
  parentPort.on("message", async (msg) => {
    if (msg.cmd === "end") {
      await cscpPool.end();
      await peerPool.end();
      parentPort.close();
      return;
    }
    const latencies = [];
    try {
      await Promise.all(msg.threads.map(async (thread) => {
        for (let t = 0; t < msg.turns; t++) {
          const start = performance.now();
          await graphs[msg.saver].invoke({ messages: [{ role: "user", content: `message ${t} about order 42` }] },
            { configurable: { thread_id: thread } });
          latencies.push(performance.now() - start);
        }
      }));
      parentPort.postMessage({ latencies });
    } catch (err) {
      parentPort.postMessage({ error: String(err?.stack ?? err) });
    }
  });
}

async function main() {
  const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,4,16").split(",").map(Number);
  const FILL = Number(process.env.BENCH_FILL ?? 200);   // turns before the second measured window
  const WINDOW = Number(process.env.BENCH_WINDOW ?? 50);
  const CORES = Number(process.env.BENCH_WORKERS ?? os.availableParallelism());

  const admin = new pg.Pool({ max: 2 });
  const walLsn = async () =>
    (await admin.query("SELECT pg_catalog.pg_current_wal_insert_lsn()::text AS l")).rows[0].l;
  const walBytes = async (from, to) =>
    Number((await admin.query("SELECT pg_catalog.pg_wal_lsn_diff($2::pg_lsn, $1::pg_lsn) AS d", [from, to])).rows[0].d);

  await admin.query(`DO $$ BEGIN CREATE ROLE bench_cscp LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  await admin.query("SELECT cscp.grant_app('bench_cscp', '{bench}')");
  await admin.query(`DO $$ BEGIN CREATE ROLE bench_peer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  await admin.query("CREATE SCHEMA IF NOT EXISTS peer AUTHORIZATION bench_peer");
  // PostgresSaver.setup() runs CREATE SCHEMA IF NOT EXISTS, which asks for CREATE on the database.
  await admin.query("DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO bench_peer', current_database()); END $$");
  {
    const cscpPool = new pg.Pool({ user: "bench_cscp", max: 1 });
    const peerPool = new pg.Pool({ user: "bench_peer", max: 1 });
    await new CscpSaver(cscpPool, { tenant: "bench" }).setup();
    await new PostgresSaver(peerPool, undefined, { schema: "peer" }).setup();
    await cscpPool.end();
    await peerPool.end();
  }

  const maxC = Math.max(...CONCURRENCY);
  const nWorkers = Math.max(1, Math.min(maxC, CORES));
  const workers = Array.from({ length: nWorkers }, () =>
    new Worker(new URL(import.meta.url), { workerData: { poolSize: Math.ceil(maxC / nWorkers) } }));
  // One request at a time per worker: its reply settles the pending promise; a worker that
  // dies fails the run.
  const pending = new Map();
  for (const w of workers) {
    w.on("message", (r) => {
      const p = pending.get(w);
      pending.delete(w);
      if (r.error) p?.reject(new Error(r.error));
      else p?.resolve(r);
    });
    w.on("error", (err) => { pending.get(w)?.reject(err); pending.delete(w); });
  }
  const ask = (w, msg) => new Promise((resolve, reject) => {
    pending.set(w, { resolve, reject });
    w.postMessage(msg);
  });

  /** turns turns on each of threads, concurrently, spread over min(threads, cores) workers */
  async function runTurns(saver, threads, turns) {
    const n = Math.min(threads.length, nWorkers);
    const parts = Array.from({ length: n }, () => []);
    threads.forEach((t, i) => parts[i % n].push(t));
    const replies = await Promise.all(parts.map((p, i) => ask(workers[i], { cmd: "run", saver, threads: p, turns })));
    return replies.flatMap((r) => r.latencies);
  }

  const p99 = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)];
  };

  async function measure(saver, threads) {
    // The process's CPU time covers every worker thread: one saver runs at a time.
    const from = await walLsn();
    const cpu = process.cpuUsage();
    const start = performance.now();
    const latencies = await runTurns(saver, threads, WINDOW);
    const secs = (performance.now() - start) / 1000;
    const used = process.cpuUsage(cpu);
    const wal = await walBytes(from, await walLsn());
    const n = threads.length * WINDOW;
    return { tps: n / secs, p99: p99(latencies), walPerTurn: saver === "memory" ? 0 : wal / n,
      cpuPerTurn: (used.user + used.system) / 1000 / n };
  }

  // Warm every saver up (Node's JIT in each worker, the connections, the plans) before anything
  // is measured, so that the saver measured first does not pay for it: as many turns as a
  // measured thread runs (BENCH_WARMUP, FILL + WINDOW), a young thread's paths and an old one's.
  // With 20 turns, V8 was still compiling in the first window measured (one thread, turns 1-50,
  // cscp first): 15.5 ms of Node CPU per cscp turn there, 5.9-6.6 ms in the same window run again.
  const WARMUP = Number(process.env.BENCH_WARMUP ?? FILL + WINDOW);
  for (const saver of SAVERS) {
    await Promise.all(workers.map((w, i) => ask(w, { cmd: "run", saver, threads: [`warm-up-${i}`], turns: WARMUP })));
  }

  const load = () => os.loadavg()[0].toFixed(1);
  console.log(`${nWorkers} worker thread(s), ${os.availableParallelism()} cores, load ${load()} at start`);
  const results = [];
  let run = 0;
  for (const c of CONCURRENCY) {
    run++;
    const threads = Object.fromEntries(SAVERS.map((s) => [s, Array.from({ length: c }, (_, i) => `r${run}-c${c}-t${i}`)]));
    // turns 1-50, alternated
    const early = {};
    for (const s of ["cscp", "peer", "memory"]) early[s] = await measure(s, threads[s]);
    // turns 51-200, not measured
    for (const s of SAVERS) await runTurns(s, threads[s], FILL - WINDOW);
    const late = {};
    for (const s of ["peer", "cscp", "memory"]) late[s] = await measure(s, threads[s]);
    for (const [window, r] of [[`1-${WINDOW}`, early], [`${FILL + 1}-${FILL + WINDOW}`, late]]) {
      const x = { threads: c, workers: Math.min(c, nWorkers), turns: window, load: Number(load()),
        ...Object.fromEntries(SAVERS.flatMap((n) => [[`${n}_tps`, r[n].tps], [`${n}_p99_ms`, r[n].p99],
          [`${n}_wal_per_turn`, r[n].walPerTurn], [`${n}_node_cpu_ms_per_turn`, r[n].cpuPerTurn]])) };
      results.push(x);
      const col = (n) => `${LABEL[n]} ${x[`${n}_tps`].toFixed(0).padStart(4)}/s p99 ${x[`${n}_p99_ms`].toFixed(1).padStart(5)} ms` +
        (n === "memory" ? "" : ` WAL ${x[`${n}_wal_per_turn`].toFixed(0).padStart(5)} B`) +
        ` Node CPU ${x[`${n}_node_cpu_ms_per_turn`].toFixed(1)} ms`;
      console.log(`threads ${String(c).padStart(2)} turns ${window.padEnd(7)} ${SAVERS.map(col).join(" | ")} | ` +
        `cscp/peer ${(x.cscp_tps / x.peer_tps).toFixed(2)}x WAL ${(x.cscp_wal_per_turn / x.peer_wal_per_turn).toFixed(2)}x, ` +
        `memory/peer ${(x.memory_tps / x.peer_tps).toFixed(2)}x, load ${x.load}`);
    }
  }
  if (process.env.BENCH_JSON) {
    const { writeFileSync } = await import("node:fs");
    writeFileSync(process.env.BENCH_JSON, JSON.stringify(results, null, 2));
  }
  await Promise.all(workers.map((w) => new Promise((resolve) => { w.once("exit", resolve); w.postMessage({ cmd: "end" }); })));
  await admin.end();
}
