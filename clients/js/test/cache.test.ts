// CscpSaver's cache of serialised channel values: a read names the values the saver holds and
// the database sends only the others, yet every tuple holds fresh objects, equal to what a saver
// without a cache reads; a thread deleted, expired, or written again elsewhere is the database's
// to say, never the cache's.
import type pg from "pg";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { CscpSaver } from "../src/index.js";
import { adminPool, appPool, freshTenant, prepare } from "./db.js";

let pool: pg.Pool;
let admin: pg.Pool;

/** What the database sent for each tuple read through the pool: the held channels, the JSON values. */
const reads: { held: string[] | null; json: string | null; named: string[] | null }[] = [];

beforeAll(async () => {
  await prepare();
  pool = appPool();
  admin = adminPool();
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult>;
  (pool as unknown as { query: unknown }).query = async (...args: unknown[]) => {
    const res = await query(...args);
    const row = res.rows?.[0];
    const values = (args[0] as { values?: unknown[] })?.values;
    if (row && "held" in row && "json_values" in row) {
      reads.push({ held: row.held, json: row.json_values, named: (values?.[5] as string[] | null) ?? null });
    }
    return res;
  };
});
afterAll(async () => {
  await pool.end();
  await admin.end();
});

const State = Annotation.Root({
  messages: Annotation<{ role: string; content: string }[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  step: Annotation<number>(),
});

function buildGraph(checkpointer: CscpSaver) {
  return new StateGraph(State)
    .addNode("agent", (s) => ({ messages: [{ role: "ai", content: `reply ${s.messages.length}` }], step: s.messages.length }))
    .addEdge(START, "agent")
    .addEdge("agent", END)
    .compile({ checkpointer });
}

const config = (thread: string) => ({ configurable: { thread_id: thread } });
const turn = (graph: ReturnType<typeof buildGraph>, thread: string, text: string) =>
  graph.invoke({ messages: [{ role: "user", content: text }] }, config(thread));

describe("CscpSaver's value cache", () => {
  it("reads the values it wrote without the database sending them, as fresh objects", async () => {
    const tenant = freshTenant("cache");
    const saver = new CscpSaver(pool, { tenant });
    const graph = buildGraph(saver);
    // (non-ASCII text: values are cut from the JSON the database sends by their byte sizes)
    for (let t = 0; t < 3; t++) await turn(graph, "th", `m${t} café ☕ 😀 "q"`);
    // (what a read names is bounded: the newest four versions of each channel)
    for (let t = 3; t < 11; t++) await turn(graph, "bounded", `m${t}`);
    reads.length = 0;
    await saver.getTuple(config("bounded"));
    expect(reads[0].named!.length).toBeGreaterThan(0);
    expect(reads[0].named!.length).toBeLessThanOrEqual(4 * 5);

    reads.length = 0;
    const first = await saver.getTuple(config("th"));
    expect(reads).toHaveLength(1);
    expect(reads[0].held).toEqual(expect.arrayContaining(["messages", "step"]));
    expect(reads[0].json).toBeNull();

    // Whatever a graph does to the objects it was given, the next read is unchanged.
    const messages = first!.checkpoint.channel_values.messages as { role: string; content: string }[];
    expect(messages).toHaveLength(6);
    messages[0].content = "changed";
    messages.push({ role: "user", content: "pushed" });
    const second = await saver.getTuple(config("th"));
    const again = second!.checkpoint.channel_values.messages as { role: string; content: string }[];
    expect(again).not.toBe(messages);
    expect(again).toHaveLength(6);
    expect(again[0]).toEqual({ role: "user", content: "m0 café ☕ 😀 \"q\"" });

    // The same as a saver without a cache reads, which is sent every value.
    const plain = new CscpSaver(pool, { tenant, cacheBytes: 0 });
    reads.length = 0;
    const fromDb = await plain.getTuple(config("th"));
    expect(reads[0].held).toBeNull();
    expect(reads[0].json).toContain("reply 5");
    expect(fromDb!.checkpoint.channel_values).toEqual(second!.checkpoint.channel_values);
    expect(fromDb!.checkpoint.channel_versions).toEqual(second!.checkpoint.channel_versions);

    // A saver that wrote nothing is sent the values once, then holds them.
    const other = new CscpSaver(pool, { tenant });
    reads.length = 0;
    expect((await other.getTuple(config("th")))!.checkpoint.channel_values).toEqual(fromDb!.checkpoint.channel_values);
    expect((await other.getTuple(config("th")))!.checkpoint.channel_values).toEqual(fromDb!.checkpoint.channel_values);
    expect(reads.map((r) => r.json === null)).toEqual([false, true]);
  });

  it("returns nothing of a thread deleted or expired elsewhere, and the new values of one written again", async () => {
    const tenant = freshTenant("cache");
    const saver = new CscpSaver(pool, { tenant });
    const elsewhere = new CscpSaver(pool, { tenant });
    const graph = buildGraph(saver);
    for (let t = 0; t < 2; t++) await turn(graph, "th", `mine ${t}`);
    expect(await saver.getTuple(config("th"))).toBeDefined();

    await elsewhere.deleteThread("th");
    expect(await saver.getTuple(config("th"))).toBeUndefined();
    await turn(buildGraph(elsewhere), "th", "theirs");
    const tuple = await saver.getTuple(config("th"));
    expect(tuple!.checkpoint.channel_values.messages).toEqual([
      { role: "user", content: "theirs" }, { role: "ai", content: "reply 1" }]);

    await turn(graph, "th", "mine again");
    await admin.query("UPDATE cscp.checkpoint_thread SET expires_at = now() - interval '1 second' WHERE tenant_id = $1", [tenant]);
    expect(await saver.getTuple(config("th"))).toBeUndefined();
  });

  it("keeps tenants apart and reads correctly past its bound", async () => {
    const a = new CscpSaver(pool, { tenant: freshTenant("cache") });
    const b = new CscpSaver(pool, { tenant: freshTenant("cache"), cacheBytes: 300 });
    await turn(buildGraph(a), "same", "for a");
    const graphB = buildGraph(b);
    for (let t = 0; t < 3; t++) await turn(graphB, "same", `for b ${t}`);
    const readA = await a.getTuple(config("same"));
    const readB = await b.getTuple(config("same"));
    expect(readA!.checkpoint.channel_values.messages).toHaveLength(2);
    expect((readA!.checkpoint.channel_values.messages as { content: string }[])[0].content).toBe("for a");
    expect(readB!.checkpoint.channel_values.messages).toHaveLength(6);
    expect((readB!.checkpoint.channel_values.messages as { content: string }[])[4].content).toBe("for b 2");
  });

  it("refuses a cache size that is not a number of bytes", () => {
    expect(() => new CscpSaver(pool, { tenant: "x", cacheBytes: -1 })).toThrow(TypeError);
    expect(() => new CscpSaver(pool, { tenant: "x", cacheBytes: Number.NaN })).toThrow(TypeError);
  });
});
