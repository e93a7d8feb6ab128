// CscpSaver under forks: two checkpoints made from one parent (LangGraph's updateState on an
// older checkpoint, a replay, two writers) each give a channel its next version.  Each branch
// must read back its own values, from the saver that wrote them and from one that wrote nothing.
import type pg from "pg";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { CscpSaver } from "../src/index.js";
import { adminPool, appPool, freshTenant, prepare } from "./db.js";

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

const State = Annotation.Root({
  messages: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
  topic: Annotation<string>(),
});

function buildGraph(checkpointer: CscpSaver) {
  return new StateGraph(State)
    .addNode("reply", (s) => ({ messages: [`reply to ${s.messages.at(-1)}`], topic: `topic of ${s.messages.at(-1)}` }))
    .addEdge(START, "reply")
    .addEdge("reply", END)
    .compile({ checkpointer });
}

type Config = { configurable: { thread_id: string; checkpoint_id?: string; checkpoint_ns?: string } };

describe("CscpSaver with forked checkpoints", () => {
  it("keeps each branch's values when two branches fork from one checkpoint", async () => {
    const tenant = freshTenant("fork");
    const saver = new CscpSaver(pool, { tenant });
    const graph = buildGraph(saver);
    const thread: Config = { configurable: { thread_id: "forked" } };
    await graph.invoke({ messages: ["one"] }, thread);
    const afterOne = (await graph.getState(thread)).config as Config;
    await graph.invoke({ messages: ["two"] }, thread);
    const mainHead = (await graph.getState(thread)).config as Config;

    // Fork from the end of the first run, twice: a run with other input (a replay) and an
    // updateState.  Each gives messages and topic the same next versions as the main branch's
    // second run gave them (counters from the same parent), with other values.
    await graph.invoke({ messages: ["other two"] }, afterOne);
    const replayHead = (await graph.getState(thread)).config as Config;
    const forked = (await graph.updateState(afterOne, { messages: ["fork"], topic: "forked topic" })) as Config;
    const forkedAgain = (await graph.updateState(afterOne, { messages: ["fork again"], topic: "topic again" })) as Config;
    await graph.invoke({ messages: ["three"] }, forked);
    const forkHead = (await graph.getState(thread)).config as Config;
    await graph.invoke({ messages: ["two and a half"] }, mainHead);

    const branches: [Config, string[], string][] = [
      [mainHead, ["one", "reply to one", "two", "reply to two"], "topic of two"],
      [replayHead, ["one", "reply to one", "other two", "reply to other two"], "topic of other two"],
      [forked, ["one", "reply to one", "fork"], "forked topic"],
      [forkedAgain, ["one", "reply to one", "fork again"], "topic again"],
      [forkHead, ["one", "reply to one", "fork", "three", "reply to three"], "topic of three"],
      [thread, ["one", "reply to one", "two", "reply to two", "two and a half", "reply to two and a half"],
        "topic of two and a half"],
    ];
    const lines = branches.map(([, messages]) => messages);
    for (const reader of [saver, new CscpSaver(pool, { tenant })]) {
      const g = buildGraph(reader);
      for (const [config, messages, topic] of branches) {
        const state = await g.getState(config);
        expect(state.values.messages).toEqual(messages);
        expect(state.values.topic).toBe(topic);
      }
      // every checkpoint of the thread reads a prefix of one of the branches
      let n = 0;
      for await (const snapshot of g.getStateHistory(thread)) {
        const messages = (snapshot.values.messages ?? []) as string[];
        expect(lines.some((line) => messages.every((m, i) => line[i] === m))).toBe(true);
        n++;
      }
      expect(n).toBeGreaterThan(10);
    }
    // Extensions (a growing list stored as its new elements) name a base of their own branch.
    const { rows } = await admin.query(
      `SELECT count(*) FILTER (WHERE base IS NOT NULL) AS extensions FROM cscp.checkpoint_blob
        WHERE tenant_id = $1 AND channel = 'messages'`, [tenant]);
    expect(Number(rows[0].extensions)).toBeGreaterThan(0);
    await saver.deleteThread("forked");
  });

  it("refuses, not drops, another value for a version stored (versions that only count)", async () => {
    // LangGraph's default versions (previous + 1), as a saver that does not override them makes
    class CountingSaver extends CscpSaver {
      override getNextVersion(current: number | undefined): number {
        return (typeof current === "number" ? current : 0) + 1;
      }
    }
    const tenant = freshTenant("count");
    const graph = buildGraph(new CountingSaver(pool, { tenant }));
    const thread: Config = { configurable: { thread_id: "counted" } };
    await graph.invoke({ messages: ["one"] }, thread);
    const afterOne = (await graph.getState(thread)).config as Config;
    await graph.invoke({ messages: ["two"] }, thread);
    const before = await admin.query("SELECT count(*) AS n FROM cscp.checkpoint WHERE tenant_id = $1", [tenant]);
    await expect(graph.invoke({ messages: ["other two"] }, afterOne))
      .rejects.toMatchObject({ name: "CscpError", sqlstate: "23505" });
    const after = await admin.query("SELECT count(*) AS n FROM cscp.checkpoint WHERE tenant_id = $1", [tenant]);
    expect(after.rows[0].n).toBe(before.rows[0].n);
    expect((await graph.getState(thread)).values.messages).toEqual(["one", "reply to one", "two", "reply to two"]);
  });

  it("gives every new version a counter and a random part, in the counters' order", async () => {
    const saver = new CscpSaver(pool, { tenant: freshTenant("ver") });
    const first = saver.getNextVersion(undefined);
    const second = saver.getNextVersion(first);
    const sibling = saver.getNextVersion(first);
    expect(String(first)).toMatch(/^a1\.[0-9A-Za-z]{6}$/);
    expect(String(second)).toMatch(/^a2\./);
    expect(second > first).toBe(true);
    expect(sibling > first).toBe(true);
    expect(sibling).not.toBe(second);
    // counters of more digits still compare greater, as strings and by localeCompare
    let v = saver.getNextVersion(8);
    const seen = [v];
    for (let i = 0; i < 1000; i++) seen.push(v = saver.getNextVersion(v));
    expect(String(v)).toMatch(/^d1009\./);
    for (let i = 1; i < seen.length; i++) {
      expect(seen[i] > seen[i - 1]).toBe(true);
      expect(String(seen[i]).localeCompare(String(seen[i - 1]))).toBe(1);
    }
    // a number (an older saver's counter) or the Python saver's padded counter is continued from
    expect(String(saver.getNextVersion(7))).toMatch(/^a8\./);
    expect(String(saver.getNextVersion("00000000000000000000000000000041.0.5" as never))).toMatch(/^b42\./);
    expect(() => saver.getNextVersion("x" as never)).toThrow(TypeError);
  });
});
