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

describe("CscpSession", () => {
  it("adds, reads, pops and clears items in order", async () => {
    const session = new CscpSession("s-1", pool, { tenant: freshTenant("sess") });
    expect(await session.getSessionId()).toBe("s-1");
    expect(await session.getItems()).toEqual([]);
    await session.addItems([{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }]);
    await session.addItems([{ role: "user", content: "bye" }]);
    expect((await session.getItems()).map((i) => i.content)).toEqual(["hi", "hello", "bye"]);
    expect((await session.getItems(2)).map((i) => i.content)).toEqual(["hello", "bye"]);
    expect(await session.popItem()).toEqual({ role: "user", content: "bye" });
    await session.clearSession();
    expect(await session.getItems()).toEqual([]);
    expect(await session.popItem()).toBeUndefined();
  });

  it("loses no write of concurrent first writers", async () => {
    const tenant = freshTenant("sess");
    const writers = Array.from({ length: 10 }, () => new CscpSession("race", pool, { tenant }));
    await Promise.all(writers.map((s, i) => s.addItems([{ n: i, part: 0 }, { n: i, part: 1 }])));
    const items = await writers[0].getItems();
    expect(items.length).toBe(20);
    // each writer's two items are adjacent: a batch is added atomically
    for (let i = 0; i < 20; i += 2) {
      expect(items[i].n).toBe(items[i + 1].n);
      expect([items[i].part, items[i + 1].part]).toEqual([0, 1]);
    }
  });

  it("never pops the same item twice", async () => {
    const tenant = freshTenant("sess");
    const session = new CscpSession("pop", pool, { tenant });
    await session.addItems(Array.from({ length: 10 }, (_, n) => ({ n })));
    const popped = await Promise.all(Array.from({ length: 12 }, () => session.popItem()));
    const got = popped.filter((p) => p !== undefined).map((p) => p!.n as number).sort((a, b) => a - b);
    expect(got).toEqual(Array.from({ length: 10 }, (_, n) => n));
  });

  it("keeps tenants apart", async () => {
    const a = new CscpSession("same", pool, { tenant: freshTenant("a") });
    const b = new CscpSession("same", pool, { tenant: freshTenant("b") });
    await a.addItems([{ owner: "a" }]);
    expect(await b.getItems()).toEqual([]);
    expect(await b.popItem()).toBeUndefined();
    expect(await a.getItems()).toEqual([{ owner: "a" }]);
  });
});
