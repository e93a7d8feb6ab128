// CscpSession for the OpenAI Agents SDK: the Session interface, and no item lost or taken
// twice under concurrent writers and poppers, the first writers of a session included.
import type pg from "pg";
import { CscpSession } from "../src/index.js";
import { appPool, freshTenant, prepare } from "./db.js";

let pool: pg.Pool;

beforeAll(async () => {
  await prepare();
  pool = appPool(10);
});
afterAll(async () => {
  await pool.end();
});

/** A user message carrying a writer's number and part in providerData. */
const tagged = (n: number, part: number): AgentInputItem => ({ role: "user", content: `${n}.${part}`, providerData: { n, part } });
/** An assistant message as a model returns it. */
const assistantMessage = (text: string): AgentInputItem =>
  ({ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] });

describe("CscpSession", () => {
  it("adds, reads, pops and clears items in order", async () => {
    const session = new CscpSession("s-1", pool, { tenant: freshTenant("sess") });
    expect(await session.getSessionId()).toBe("s-1");
    expect(await session.getItems()).toEqual([]);
    await session.addItems([{ role: "user", content: "hi" }, assistantMessage("hello")]);
    await session.addItems([{ role: "user", content: "bye" }]);
    expect((await session.getItems()).map(textOf)).toEqual(["hi", "hello", "bye"]);
    expect((await session.getItems(2)).map(textOf)).toEqual(["hello", "bye"]);
    expect(await session.popItem()).toEqual({ role: "user", content: "bye" });
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    expect(await session.popItem()).toBeUndefined();
  });

  it("loses no write of concurrent first writers", async () => {
    const tenant = freshTenant("sess");
    const writers = Array.from({ length: 10 }, () => new CscpSession("race", pool, { tenant }));
    await Promise.all(writers.map((s, i) => s.addItems([tagged(i, 0), tagged(i, 1)])));
    const items = await writers[0].getItems();
    expect(items.length).toBe(20);
    // each writer's two items are adjacent: a batch is added atomically
    for (let i = 0; i < 20; i += 2) {
      expect(items[i].providerData?.n).toBe(items[i + 1].providerData?.n);
      expect([items[i].providerData?.part, items[i + 1].providerData?.part]).toEqual([0, 1]);
    }
  });

  it("never pops the same item twice", async () => {
    const tenant = freshTenant("sess");
    const session = new CscpSession("pop", pool, { tenant });
    await session.addItems(Array.from({ length: 10 }, (_, n) => tagged(n, 0)));
    const popped = await Promise.all(Array.from({ length: 12 }, () => session.popItem()));
    const got = popped.filter((p) => p !== undefined).map((p) => p!.providerData?.n as number).sort((a, b) => a - b);
    expect(got).toEqual(Array.from({ length: 10 }, (_, n) => n));
  });

  it("keeps tenants apart", async () => {
    const a = new CscpSession("same", pool, { tenant: freshTenant("a") });
    const b = new CscpSession("same", pool, { tenant: freshTenant("b") });
    await a.addItems([{ role: "user", content: "owner a" }]);
    expect(await b.getItems()).toEqual([]);
    expect(await b.popItem()).toBeUndefined();
    expect(await a.getItems()).toEqual([{ role: "user", content: "owner a" }]);
  });
});

// ---------------------------------------------------------------------------------------------
// CscpSession as @openai/agents uses it: a real Agent run with run(agent, input, { session }),
// its model a stub implementing the SDK's Model interface (canned responses, no network).

import {
  Agent,
  MemorySession,
  run,
  RunState,
  setTracingDisabled,
  tool,
  Usage,
  type AgentInputItem,
  type Model,
  type ModelRequest,
  type ModelResponse,
  type Session,
  type StreamEvent,
} from "@openai/agents";
import { z } from "zod";

setTracingDisabled(true);

/** The text of a user or assistant message item, "" for other items. */
function textOf(item: AgentInputItem): string {
  const m = item as { role?: string; content?: unknown };
  if (typeof m.content === "string") return m.content;
  if (Array.isArray(m.content)) return m.content.map((c: unknown) => (c as { text?: string }).text ?? "").join("");
  return "";
}

/**
 * A model that answers every request with what it was given: "seen N: <user texts>" (N the
 * number of input items), so a second turn shows whether the first turn's items came back.
 * With toolFirst, its first answer to a request without a tool result calls the tool "lookup".
 */
class EchoModel implements Model {
  readonly requests: AgentInputItem[][] = [];
  private n = 0;
  constructor(private readonly toolFirst = false) {}

  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const input: AgentInputItem[] = typeof request.input === "string"
      ? [{ role: "user", content: request.input }]
      : request.input;
    this.requests.push(structuredClone(input));
    const id = `msg_${++this.n}`;
    const hasToolResult = input.some((i) => (i as { type?: string }).type === "function_call_result");
    const lastIsUser = (input.at(-1) as { role?: string } | undefined)?.role === "user";
    if (this.toolFirst && lastIsUser && !hasToolResult) {
      return {
        usage: new Usage(),
        responseId: `resp_${this.n}`,
        output: [{ type: "function_call", id: `fc_${this.n}`, callId: `call_${this.n}`, name: "lookup",
                   status: "completed", arguments: JSON.stringify({ city: "Lisbon" }) }],
      };
    }
    const users = input.filter((i) => (i as { role?: string }).role === "user").map(textOf);
    return {
      usage: new Usage(),
      responseId: `resp_${this.n}`,
      output: [{ type: "message", id, role: "assistant", status: "completed",
                 content: [{ type: "output_text", text: `seen ${input.length}: ${users.join(" | ")}` }] }],
    };
  }

  /** The same answer as a stream: started, the text as deltas, done. */
  async *getStreamedResponse(request: ModelRequest): AsyncIterable<StreamEvent> {
    const response = await this.getResponse(request);
    yield { type: "response_started" };
    for (const item of response.output) {
      if (item.type === "message" && Array.isArray(item.content)) {
        for (const part of item.content as { type: string; text?: string }[]) {
          if (part.type === "output_text") yield { type: "output_text_delta", delta: part.text ?? "" };
        }
      }
    }
    yield { type: "response_done",
            response: { id: response.responseId!, usage: { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 },
                        output: response.output as never } };
  }
}

const lookup = tool({
  name: "lookup",
  description: "The weather of a city",
  parameters: z.object({ city: z.string() }),
  execute: async ({ city }) => `sunny in ${city}`,
});

function agentOn(model: Model, withTool = false): Agent {
  return new Agent({ name: "assistant", instructions: "Answer briefly.", model, tools: withTool ? [lookup] : [] });
}

/** A user message as the SDK's own session tests write it. */
const userMessage = (text: string): AgentInputItem => ({ role: "user", content: [{ type: "input_text", text }] });

describe("CscpSession with @openai/agents", () => {
  it("is a Session of the SDK", () => {
    const s: Session = new CscpSession("typed", pool, { tenant: "t" });
    expect(typeof s.getItems).toBe("function");
  });

  it("gives a run the items of the previous run (two turns, then a new process's session object)", async () => {
    const tenant = freshTenant("agents");
    const model = new EchoModel();
    const agent = agentOn(model);
    const session = new CscpSession("turns", pool, { tenant });

    const first = await run(agent, "My name is Ana.", { session });
    expect(first.finalOutput).toBe("seen 1: My name is Ana.");
    const second = await run(agent, "What is my name?", { session });
    // the second request carries the first turn's user message and answer, then the new input
    expect(model.requests[1].length).toBe(3);
    expect(second.finalOutput).toBe("seen 3: My name is Ana. | What is my name?");

    // another CscpSession object on the same id (as another process would make) has the history
    const again = new CscpSession("turns", pool, { tenant });
    const items = await again.getItems();
    expect(items.map((i) => (i as { role?: string }).role)).toEqual(["user", "assistant", "user", "assistant"]);
    expect(textOf(items[3])).toBe("seen 3: My name is Ana. | What is my name?");
    const third = await run(agent, "And now?", { session: again });
    expect(third.finalOutput).toBe("seen 5: My name is Ana. | What is my name? | And now?");
  });

  it("stores what the SDK's MemorySession stores for the same runs, tool calls included", async () => {
    const tenant = freshTenant("agents");
    const cscp = new CscpSession("same-as-memory", pool, { tenant });
    const memory = new MemorySession({ sessionId: "same-as-memory" });
    for (const session of [cscp, memory] as Session[]) {
      const agent = agentOn(new EchoModel(true), true);
      await run(agent, "Weather in Lisbon?", { session });
      await run(agent, "And tomorrow?", { session });
    }
    const stored = await cscp.getItems();
    const types = stored.map((i) => (i as { type?: string; role?: string }).type ?? (i as { role?: string }).role);
    expect(types).toContain("function_call");
    expect(types).toContain("function_call_result");
    expect(stored).toEqual(JSON.parse(JSON.stringify(await memory.getItems())));
  });

  it("persists a streamed run's items as a plain run does", async () => {
    const tenant = freshTenant("agents");
    const model = new EchoModel();
    const session = new CscpSession("streamed", pool, { tenant });
    const first = await run(agentOn(model), "stream one", { session, stream: true });
    let text = "";
    for await (const event of first.toTextStream()) text += event;
    await first.completed;
    expect(text).toBe("seen 1: stream one");
    const second = await run(agentOn(model), "stream two", { session, stream: true });
    for await (const _ of second) { /* drain */ }
    await second.completed;
    expect(second.finalOutput).toBe("seen 3: stream one | stream two");
    expect((await session.getItems()).map(textOf)).toEqual(
      ["stream one", "seen 1: stream one", "stream two", "seen 3: stream one | stream two"]);
  });

  it("loses nothing when runs on one new session add at once (openai-agents-python#2722)", async () => {
    const tenant = freshTenant("agents");
    const runs = 8;
    const agent = agentOn(new EchoModel());
    await Promise.all(Array.from({ length: runs }, (_, n) =>
      run(agent, `message ${n}`, { session: new CscpSession("concurrent", pool, { tenant }) })));
    const items = await new CscpSession("concurrent", pool, { tenant }).getItems();
    expect(items.length).toBe(2 * runs);
    const users = items.filter((i) => (i as { role?: string }).role === "user").map(textOf).sort();
    expect(users).toEqual(Array.from({ length: runs }, (_, n) => `message ${n}`).sort());
    // each run's items are added as one batch: every user message is followed by an answer
    for (let i = 0; i < items.length; i += 2) {
      expect((items[i] as { role?: string }).role).toBe("user");
      expect((items[i + 1] as { role?: string }).role).toBe("assistant");
    }
  });

  it("keeps one tenant's runs from another tenant's session of the same id", async () => {
    const model = new EchoModel();
    const agent = agentOn(model);
    const a = new CscpSession("shared-id", pool, { tenant: freshTenant("a") });
    const b = new CscpSession("shared-id", pool, { tenant: freshTenant("b") });
    await run(agent, "secret of a", { session: a });
    const resB = await run(agent, "hello from b", { session: b });
    expect(resB.finalOutput).toBe("seen 1: hello from b");
    expect((await b.getItems()).map(textOf)).toEqual(["hello from b", "seen 1: hello from b"]);
    expect((await a.getItems()).map(textOf)).toEqual(["secret of a", "seen 1: secret of a"]);
  });

  it("refuses another tenant's session to direct SQL as the application role (42501), changing nothing", async () => {
    const tenant = freshTenant("owner");
    const session = new CscpSession("mine", pool, { tenant });
    await session.addItems([userMessage("kept")]);
    const client = await pool.connect();
    const codes: (string | undefined)[] = [];
    try {
      for (const sql of ["SELECT cscp.session_add_items($1, 'mine', '[{\"role\": \"user\", \"content\": \"x\"}]')",
                         "SELECT cscp.session_get_items($1, 'mine')",
                         "SELECT cscp.session_pop_item($1, 'mine')",
                         "SELECT cscp.session_clear($1, 'mine')"]) {
        await client.query("BEGIN");
        await client.query("SET LOCAL cscp.tenant_id = 'someone-else'");
        codes.push(await client.query(sql, [tenant]).then(() => "ok", (e: { code?: string }) => e.code));
        await client.query("ROLLBACK");
      }
    } finally {
      client.release();
    }
    expect(codes).toEqual(["42501", "42501", "42501", "42501"]);
    expect((await session.getItems()).map(textOf)).toEqual(["kept"]);
  });

  it("lets a caller correct the last turn with popItem, and start over with clearSession", async () => {
    const tenant = freshTenant("agents");
    const model = new EchoModel();
    const agent = agentOn(model);
    const session = new CscpSession("correct", pool, { tenant });
    await run(agent, "first question", { session });
    await run(agent, "wrong question", { session });
    // the SDK's correction pattern: pop the answer, then the question
    expect(textOf((await session.popItem())!)).toBe("seen 3: first question | wrong question");
    expect(textOf((await session.popItem())!)).toBe("wrong question");
    const fixed = await run(agent, "right question", { session });
    expect(fixed.finalOutput).toBe("seen 3: first question | right question");
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    const fresh = await run(agent, "after clear", { session });
    expect(fresh.finalOutput).toBe("seen 1: after clear");
  });

  // Ported from the SDK's packages/agents-core/test/memorySession.test.ts.
  it("stores and retrieves items (memorySession.test.ts)", async () => {
    const session = new CscpSession("session-1", pool, { tenant: freshTenant("port") });
    const initialItems = [userMessage("hello")];
    await session.addItems(initialItems);
    expect(await session.getSessionId()).toBe("session-1");
    expect(await session.getItems()).toEqual(initialItems);
    const newItems = [userMessage("one"), userMessage("two")];
    await session.addItems(newItems);
    expect(await session.getItems()).toEqual([...initialItems, ...newItems]);
    expect(await session.getItems(2)).toEqual(newItems);
    expect(await session.popItem()).toEqual(newItems[1]);
    expect(await session.getItems()).toEqual([...initialItems, newItems[0]]);
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    expect(await session.getItems(3)).toEqual([]);
    expect(await session.popItem()).toBeUndefined();
  });

  it("returns copies so external mutations do not persist (memorySession.test.ts)", async () => {
    const session = new CscpSession("session-2", pool, { tenant: freshTenant("port") });
    await session.addItems([userMessage("start")]);
    const items = await session.getItems();
    (items[0] as { content: unknown }).content = "mutated";
    expect(await session.getItems()).toEqual([userMessage("start")]);
    const next = userMessage("next");
    await session.addItems([next]);
    (next as { content: unknown }).content = "mutated";
    expect(await session.getItems()).toEqual([userMessage("start"), userMessage("next")]);
    const popped = await session.popItem();
    expect(popped).toEqual(userMessage("next"));
    (popped as { content: unknown }).content = "mutated";
    expect(await session.getItems()).toEqual([userMessage("start")]);
  });

  it("returns no items for a limit that is not positive, as MemorySession does", async () => {
    const session = new CscpSession("limits", pool, { tenant: freshTenant("port") });
    const memory = new MemorySession({ sessionId: "limits" });
    for (const s of [session, memory] as Session[]) await s.addItems([userMessage("a"), userMessage("b")]);
    for (const limit of [0, -1, 1, 5]) {
      expect(await session.getItems(limit)).toEqual(await memory.getItems(limit));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Ported from the SDK's packages/agents-core/test/hitlMemorySessionScenario.test.ts: tools that
// need approval, each turn interrupted, approved or rejected, and resumed; here the second turn
// resumes in "another process": a new CscpSession object and the run state from its string.

const TOOL_ECHO = "approved_echo";
const TOOL_NOTE = "approved_note";
const REJECTION_OUTPUT = "Tool execution was not approved.";
const executeCounts = new Map<string, number>();

function approvalTool(name: string, prefix: string) {
  const t = tool({
    name,
    description: `${name} after approval`,
    parameters: z.object({ query: z.string() }),
    async execute({ query }: { query: string }) {
      executeCounts.set(name, (executeCounts.get(name) ?? 0) + 1);
      return `${prefix}:${query}`;
    },
  });
  t.needsApproval = async () => true;
  return t;
}
const approvalEchoTool = approvalTool(TOOL_ECHO, "approved");
const approvalNoteTool = approvalTool(TOOL_NOTE, "approved_note");

/** Calls the tool the model settings choose with the last user message (the SDK test's script). */
class ToolChoiceModel implements Model {
  private n = 0;
  async getResponse(request: ModelRequest): Promise<ModelResponse> {
    const toolName = typeof request.modelSettings.toolChoice === "string" ? request.modelSettings.toolChoice : TOOL_ECHO;
    const items = typeof request.input === "string" ? [{ role: "user", content: request.input } as AgentInputItem] : request.input;
    const lastUser = [...items].reverse().find((i) => (i as { role?: string }).role === "user");
    const callId = `call_${this.n++}`;
    return {
      usage: new Usage(),
      output: [{ id: `fc_${callId}`, type: "function_call", name: toolName, callId, status: "completed",
                 arguments: JSON.stringify({ query: lastUser ? textOf(lastUser) : "" }), providerData: {} }],
    };
  }
  // eslint-disable-next-line require-yield
  async *getStreamedResponse(): AsyncIterable<StreamEvent> {
    throw new Error("ToolChoiceModel does not stream");
  }
}

describe("CscpSession HITL scenario (hitlMemorySessionScenario.test.ts)", () => {
  it("persists approvals, rehydration, and rejections across tools", async () => {
    executeCounts.clear();
    const tenant = freshTenant("hitl");
    const model = new ToolChoiceModel();
    const messages = ["Fetch profile for customer 104.", "Update note for customer 104.", "Delete note for customer 104."];
    const steps = [
      { label: "turn 1", toolName: TOOL_ECHO, approve: true, expected: `approved:${messages[0]}` },
      { label: "turn 2 (rehydrated)", toolName: TOOL_NOTE, approve: true, expected: `approved_note:${messages[1]}` },
      { label: "turn 3 (rejected)", toolName: TOOL_ECHO, approve: false, expected: REJECTION_OUTPUT },
    ];
    for (const [n, step] of steps.entries()) {
      // a new session object per turn; the run state crosses as its string on turn 2
      const session = new CscpSession("hitl", pool, { tenant });
      const agent = new Agent({
        name: `CscpSession ${step.label}`,
        instructions: `Always call ${step.toolName} before responding.`,
        model,
        tools: [approvalEchoTool, approvalNoteTool],
        modelSettings: { toolChoice: step.toolName },
        toolUseBehavior: "stop_on_first_tool",
      });
      const first = await run(agent, messages[n], { session });
      expect(first.interruptions).toHaveLength(1);
      const approval = first.interruptions[0];
      const state = n === 1 ? await RunState.fromString<undefined, Agent>(agent, first.state.toString()) : first.state;
      const pending = n === 1 ? state.getInterruptions()[0] : approval;
      if (step.approve) state.approve(pending);
      else state.reject(pending);
      const resumed = await run(agent, state, { session: n === 1 ? new CscpSession("hitl", pool, { tenant }) : session });
      expect(resumed.interruptions).toHaveLength(0);
      expect(resumed.finalOutput).toBe(step.expected);

      const items = await session.getItems();
      const calls = items.filter((i) => (i as { type?: string }).type === "function_call") as
        { name: string; callId: string }[];
      const results = items.filter((i) => (i as { type?: string }).type === "function_call_result") as
        { name: string; callId: string; output: unknown }[];
      const users = items.filter((i) => (i as { role?: string }).role === "user");
      expect([users.length, calls.length, results.length]).toEqual([n + 1, n + 1, n + 1]);
      expect(textOf(users.at(-1)!)).toBe(messages[n]);
      const rawCall = approval.rawItem as { callId: string };
      expect(calls.at(-1)!.name).toBe(step.toolName);
      expect(results.at(-1)!.name).toBe(step.toolName);
      expect(calls.at(-1)!.callId).toBe(rawCall.callId);
      expect(results.at(-1)!.callId).toBe(rawCall.callId);
      const output = results.at(-1)!.output as string | { text?: string };
      expect(typeof output === "string" ? output : output.text).toBe(step.expected);
    }
    expect(executeCounts.get(TOOL_ECHO)).toBe(1);
    expect(executeCounts.get(TOOL_NOTE)).toBe(1);
    await new CscpSession("hitl", pool, { tenant }).clearSession();
    expect(await new CscpSession("hitl", pool, { tenant }).getItems()).toEqual([]);
  });
});
