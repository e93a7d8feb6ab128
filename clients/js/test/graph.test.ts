// CscpSaver under a real StateGraph: an interrupt resumed from a second process, two tenants'
// threads apart, a thread past its TTL gone, deleteThread and the sweep leaving nothing.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type pg from "pg";
import { Command } from "@langchain/langgraph";
import { CscpSaver } from "../src/index.js";
// @ts-expect-error: a plain ES module shared with the child process
import { buildGraph } from "./graph-def.mjs";
import { adminPool, appConnString, appPool, freshTenant, prepare } from "./db.js";

const run = promisify(execFile);
let pool: pg.Pool;
let admin: pg.Pool;

beforeAll(async () => {
  await prepare();
  pool = appPool();
  admin = adminPool();
});
afterAll(async () => {
  await pool.end();
  await admin.end();
});

async function rowsOf(tenant: string, thread: string): Promise<number> {
  const { rows } = await admin.query(
    `SELECT (SELECT count(*) FROM cscp.checkpoint WHERE tenant_id = $1 AND thread_id = $2)
          + (SELECT count(*) FROM cscp.checkpoint_blob WHERE tenant_id = $1 AND thread_id = $2)
          + (SELECT count(*) FROM cscp.checkpoint_write WHERE tenant_id = $1 AND thread_id = $2)
          + (SELECT count(*) FROM cscp.checkpoint_thread WHERE tenant_id = $1 AND thread_id = $2) AS n`, [tenant, thread]);
  return Number(rows[0].n);
}

describe("CscpSaver with a StateGraph", () => {
  it("resumes an interrupted thread from a second process", async () => {
    const tenant = freshTenant("graph");
    const saver = new CscpSaver(pool, { tenant });
    const graph = buildGraph(saver);
    const config = { configurable: { thread_id: "order-42" } };
    const first = await graph.invoke({ messages: ["user: cancel my order"] }, config);
    expect(first.__interrupt__?.[0]?.value).toEqual({ question: "Cancel order 42?" });
    const state = await graph.getState(config);
    expect(state.next).toEqual(["ask"]);

    const { stdout } = await run(process.execPath, ["test/resume.mjs", appConnString(), tenant, "order-42", "yes"],
      { env: process.env });
    const resumed = JSON.parse(stdout);
    expect(resumed.messages).toEqual(["user: cancel my order", "draft: cancel order 42", "user said yes", "cancelled"]);
    expect(resumed.approved).toBe(true);

    const final = await graph.getState(config);
    expect(final.next).toEqual([]);
    expect(final.values.messages.at(-1)).toBe("cancelled");
  });

  it("stores only the channels that changed at each step", async () => {
    const tenant = freshTenant("graph");
    const graph = buildGraph(new CscpSaver(pool, { tenant }));
    await graph.invoke({ messages: ["hi"] }, { configurable: { thread_id: "t" } });
    const { rows } = await admin.query(
      `SELECT count(*) AS checkpoints,
              (SELECT count(*) FROM cscp.checkpoint_blob WHERE tenant_id = $1) AS blobs,
              (SELECT count(*) FROM cscp.checkpoint_blob WHERE tenant_id = $1 AND channel = 'messages') AS message_blobs
         FROM cscp.checkpoint WHERE tenant_id = $1`, [tenant]);
    // messages changed at the input and in draft; later checkpoints reuse those blobs
    expect(Number(rows[0].message_blobs)).toBeLessThan(Number(rows[0].checkpoints));
  });

  it("stores a growing messages list as its new messages, and reads it back whole", async () => {
    const tenant = freshTenant("grow");
    const saver = new CscpSaver(pool, { tenant });
    const config = { configurable: { thread_id: "long" } };
    await buildGraph(saver).invoke({ messages: ["user: cancel my order"] }, config);
    await buildGraph(saver).invoke(new Command({ resume: "yes" }), config);
    const { rows } = await admin.query(
      `SELECT count(*) FILTER (WHERE base IS NULL) AS whole, count(*) FILTER (WHERE base IS NOT NULL) AS extensions
         FROM cscp.checkpoint_blob WHERE tenant_id = $1 AND channel = 'messages'`, [tenant]);
    expect(Number(rows[0].whole)).toBe(1);
    expect(Number(rows[0].extensions)).toBeGreaterThan(1);
    const expected = ["user: cancel my order", "draft: cancel order 42", "user said yes", "cancelled"];
    // a saver that wrote nothing reads the whole list, at every checkpoint of the thread
    const other = new CscpSaver(pool, { tenant });
    expect((await other.getTuple(config))?.checkpoint.channel_values.messages).toEqual(expected);
    for await (const t of other.list(config)) {
      const messages = t.checkpoint.channel_values.messages as string[] | undefined;
      if (messages) expect(expected.slice(0, messages.length)).toEqual(messages);
    }
    // and writes the whole list first, then extends its own
    await buildGraph(other).invoke({ messages: ["user: thanks"] }, config);
    const after = await admin.query(
      `SELECT count(*) FILTER (WHERE base IS NULL) AS whole FROM cscp.checkpoint_blob
        WHERE tenant_id = $1 AND channel = 'messages'`, [tenant]);
    expect(Number(after.rows[0].whole)).toBe(2);
    // the first saver's base is still stored as it wrote it: it extends it past the other's messages
    await buildGraph(saver).invoke({ messages: ["user: bye"] }, config);
    const last = (await new CscpSaver(pool, { tenant }).getTuple(config))?.checkpoint.channel_values.messages as string[];
    expect(last.slice(0, 5)).toEqual([...expected, "user: thanks"]);
    expect(last).toContain("user: bye");
    await saver.deleteThread("long");
    expect(await rowsOf(tenant, "long")).toBe(0);
  });

  it("never shows one tenant's thread to another", async () => {
    const a = new CscpSaver(pool, { tenant: freshTenant("a") });
    const b = new CscpSaver(pool, { tenant: freshTenant("b") });
    const config = { configurable: { thread_id: "same-thread" } };
    await buildGraph(a).invoke({ messages: ["from a"] }, config);
    expect(await b.getTuple(config)).toBeUndefined();
    const listed = [];
    for await (const t of b.list({})) listed.push(t);
    expect(listed).toEqual([]);
    await b.deleteThread("same-thread");
    expect(await a.getTuple(config)).toBeDefined();
  });

  it("loses a thread past its tenant's checkpoint_ttl at once, and the sweep removes it", async () => {
    const tenant = freshTenant("ttl");
    await admin.query("SELECT cscp.policy_set($1, '{\"checkpoint_ttl\": \"1 hour\"}')", [tenant]);
    const saver = new CscpSaver(pool, { tenant });
    const config = { configurable: { thread_id: "short" } };
    await buildGraph(saver).invoke({ messages: ["hi"] }, config);
    const { rows } = await admin.query("SELECT expires_at - updated_at AS ttl FROM cscp.checkpoint_thread WHERE tenant_id = $1", [tenant]);
    expect(rows[0].ttl).toMatchObject({ hours: 1 });
    await admin.query("UPDATE cscp.checkpoint_thread SET expires_at = now() - interval '1 second' WHERE tenant_id = $1", [tenant]);
    expect(await saver.getTuple(config)).toBeUndefined();
    const listed = [];
    for await (const t of saver.list(config)) listed.push(t);
    expect(listed).toEqual([]);
    expect(await rowsOf(tenant, "short")).toBeGreaterThan(0);
    await admin.query("SELECT cscp.sweep(1000)");
    expect(await rowsOf(tenant, "short")).toBe(0);
    await admin.query("DELETE FROM cscp.policy WHERE tenant_id = $1", [tenant]);
  });

  it("deleteThread leaves nothing of the thread", async () => {
    const tenant = freshTenant("del");
    const saver = new CscpSaver(pool, { tenant });
    await buildGraph(saver).invoke({ messages: ["hi"] }, { configurable: { thread_id: "gone" } });
    expect(await rowsOf(tenant, "gone")).toBeGreaterThan(0);
    await saver.deleteThread("gone");
    expect(await rowsOf(tenant, "gone")).toBe(0);
  });

  it("reports a database error as CscpError with its SQLSTATE", async () => {
    const saver = new CscpSaver(pool, { tenant: "*" });
    await expect(saver.put({ configurable: { thread_id: "x" } }, { v: 4, id: "c", ts: "", channel_values: {}, channel_versions: {}, versions_seen: {} }, { source: "input", step: -1, parents: {} }, {}))
      .rejects.toMatchObject({ name: "CscpError", sqlstate: expect.stringMatching(/^(22023|42501|23514)$/) });
  });
});
