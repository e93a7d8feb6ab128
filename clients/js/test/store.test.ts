// CscpStore, tested as LangGraph tests its own stores (the cases of LangGraph JS's store tests:
// batch, CRUD, namespace rules, listing, search with filters and text, TTL), plus TTL refresh
// and expiry, tenant isolation and concurrent writers.
import type pg from "pg";
import { CscpStore } from "../src/index.js";
import { adminPool, appPool, freshTenant, prepare } from "./db.js";

let pool: pg.Pool;
let admin: pg.Pool;
let store: CscpStore;

beforeAll(async () => {
  await prepare();
  pool = appPool(8);
  admin = adminPool();
});
afterAll(async () => {
  await pool.end();
  await admin.end();
});
beforeEach(async () => {
  store = new CscpStore(pool, { tenant: freshTenant("store") });
  await store.setup();
});

/** Move a tenant's expiries into the past by ms, as time passing would (as the superuser). */
async function age(tenant: string, ms: number) {
  await admin.query("UPDATE cscp.store_item SET expires_at = expires_at - $2::interval WHERE tenant_id = $1",
    [tenant, `${ms} milliseconds`]);
}

describe("batch", () => {
  it("runs puts and gets in order, in one transaction", async () => {
    const results = await store.batch([
      { namespace: ["batch"], key: "item1", value: { data: "first" } },
      { namespace: ["batch"], key: "item2", value: { data: "second" } },
      { namespace: ["batch"], key: "item1" },
    ]);
    expect(results).toHaveLength(3);
    expect(results[0]).toBeUndefined();
    expect(results[1]).toBeUndefined();
    expect((results[2] as { value: unknown }).value).toEqual({ data: "first" });
  });

  it("refuses a batch with an invalid namespace, and writes none of it", async () => {
    await expect(store.batch([
      { namespace: ["batch"], key: "item1", value: { data: "first" } },
      { namespace: [], key: "item2", value: { data: "invalid" } },
    ])).rejects.toThrow("Namespace cannot be empty");
    expect(await store.get(["batch"], "item1")).toBeNull();
  });
});

describe("crud", () => {
  it("stores and returns an item with its times", async () => {
    await store.put(["crud", "simple"], "item1", { foo: "bar", num: 42 });
    const item = await store.get(["crud", "simple"], "item1");
    expect(item?.namespace).toEqual(["crud", "simple"]);
    expect(item?.key).toBe("item1");
    expect(item?.value).toEqual({ foo: "bar", num: 42 });
    expect(item?.createdAt).toBeInstanceOf(Date);
    expect(item?.updatedAt).toBeInstanceOf(Date);
  });

  it("replaces an item and moves updatedAt", async () => {
    await store.put(["crud", "update"], "item2", { foo: "bar" });
    const before = await store.get(["crud", "update"], "item2");
    await new Promise((r) => setTimeout(r, 5));
    await store.put(["crud", "update"], "item2", { foo: "baz", extra: 123 });
    const after = await store.get(["crud", "update"], "item2");
    expect(before?.value).toEqual({ foo: "bar" });
    expect(after?.value).toEqual({ foo: "baz", extra: 123 });
    expect(after!.updatedAt.getTime()).toBeGreaterThan(before!.updatedAt.getTime());
    expect(after!.createdAt.getTime()).toBe(before!.createdAt.getTime());
  });

  it("deletes an item", async () => {
    await store.put(["crud", "delete"], "item3", { toDelete: true });
    expect(await store.get(["crud", "delete"], "item3")).not.toBeNull();
    await store.delete(["crud", "delete"], "item3");
    expect(await store.get(["crud", "delete"], "item3")).toBeNull();
  });

  it("keeps complex JSON values as they were", async () => {
    const value = { string: "test", number: 42, boolean: true, null: null, array: [1, 2, 3, "four"],
      nested: { deep: { value: "nested data" } } };
    await store.put(["crud", "complex"], "item4", value);
    expect((await store.get(["crud", "complex"], "item4"))?.value).toEqual(value);
  });

  it("returns null for an item that does not exist", async () => {
    expect(await store.get(["crud", "missing"], "nope")).toBeNull();
  });

  it.each([
    [[], "Namespace cannot be empty"],
    [["invalid.namespace"], "Namespace labels cannot contain periods"],
    [["valid", ""], "Namespace labels cannot be empty strings"],
    [["valid", 123 as unknown as string], "Namespace labels must be strings"],
    [["langgraph"], 'Root label for namespace cannot be "langgraph"'],
  ])("refuses the namespace %j", async (namespace, message) => {
    await expect(store.put(namespace as string[], "key", { foo: "bar" })).rejects.toThrow(message);
  });

  it("takes a TTL per item", async () => {
    await store.put(["ttl", "custom"], "tempItem", { data: "temporary data" }, undefined, { ttl: 5 });
    expect((await store.get(["ttl", "custom"], "tempItem"))?.value).toEqual({ data: "temporary data" });
  });
});

describe("listNamespaces", () => {
  beforeEach(async () => {
    await store.put(["docs", "v1"], "item1", { data: "test" });
    await store.put(["docs", "v2"], "item2", { data: "test" });
    await store.put(["cache", "temp"], "item3", { data: "test" });
    await store.put(["users", "u1", "memories"], "m", { data: "test" });
  });

  it("lists every namespace, sorted", async () => {
    expect(await store.listNamespaces()).toEqual([["cache", "temp"], ["docs", "v1"], ["docs", "v2"], ["users", "u1", "memories"]]);
  });

  it("filters by prefix, suffix and wildcard, cuts at maxDepth, pages", async () => {
    expect(await store.listNamespaces({ prefix: ["docs"] })).toEqual([["docs", "v1"], ["docs", "v2"]]);
    expect(await store.listNamespaces({ suffix: ["memories"] })).toEqual([["users", "u1", "memories"]]);
    expect(await store.listNamespaces({ prefix: ["users", "*", "memories"] })).toEqual([["users", "u1", "memories"]]);
    expect(await store.listNamespaces({ maxDepth: 1 })).toEqual([["cache"], ["docs"], ["users"]]);
    expect(await store.listNamespaces({ limit: 2, offset: 1 })).toEqual([["docs", "v1"], ["docs", "v2"]]);
  });
});

describe("search", () => {
  beforeEach(async () => {
    await store.put(["docs"], "doc1", { title: "JavaScript Guide", content: "Complete guide to JavaScript programming",
      category: "programming", difficulty: "beginner", tags: ["javascript", "web", "tutorial"] });
    await store.put(["docs"], "doc2", { title: "TypeScript Handbook", content: "Advanced TypeScript programming techniques",
      category: "programming", difficulty: "intermediate", tags: ["typescript", "javascript", "types"] });
    await store.put(["docs"], "doc3", { title: "Python Basics", content: "Introduction to Python programming language",
      category: "programming", difficulty: "beginner", tags: ["python", "basics"] });
    await store.put(["recipes"], "recipe1", { title: "Chocolate Cake", content: "Delicious chocolate cake recipe",
      category: "dessert", difficulty: "easy", tags: ["chocolate", "cake", "baking"] });
  });

  it("searches a namespace prefix", async () => {
    const results = await store.search(["docs"]);
    expect(results.map((r) => r.key).sort()).toEqual(["doc1", "doc2", "doc3"]);
    expect(results.every((r) => r.namespace[0] === "docs")).toBe(true);
  });

  it("filters on values and operators", async () => {
    expect((await store.search(["docs"], { filter: { category: "programming" } })).length).toBe(3);
    expect((await store.search(["docs"], { filter: { difficulty: { $eq: "beginner" } } })).map((r) => r.key).sort()).toEqual(["doc1", "doc3"]);
    expect((await store.search(["docs"], { filter: { category: "programming", difficulty: { $ne: "beginner" } } })).map((r) => r.key)).toEqual(["doc2"]);
    expect((await store.search(["docs"], { filter: { difficulty: { $in: ["beginner", "intermediate"] } } })).length).toBe(3);
    expect((await store.search([], { filter: { difficulty: { $nin: ["beginner", "intermediate"] } } })).map((r) => r.key)).toEqual(["recipe1"]);
  });

  it("pages with limit and offset, without overlap", async () => {
    const page1 = await store.search(["docs"], { limit: 2, offset: 0 });
    const page2 = await store.search(["docs"], { limit: 2, offset: 2 });
    expect(page1.length).toBe(2);
    expect(page2.length).toBe(1);
    expect(page1.map((r) => r.key).filter((k) => page2.some((p) => p.key === k))).toEqual([]);
  });

  it("returns nothing for a namespace with no items", async () => {
    expect(await store.search(["nonexistent"])).toEqual([]);
  });

  it("ranks a text query in the database, best first, with a score", async () => {
    const results = await store.search([], { query: "javascript programming" });
    expect(results.map((r) => r.key)).toEqual(["doc1", "doc2"]);
    expect(results.every((r) => typeof r.score === "number")).toBe(true);
    expect(results[0].score!).toBeGreaterThanOrEqual(results[1].score!);
  });

  it("combines a filter with a text query", async () => {
    const results = await store.search(["docs"], { query: "guide", filter: { difficulty: "beginner" } });
    expect(results.map((r) => r.key)).toEqual(["doc1"]);
  });
});

describe("ttl", () => {
  it("gives items the default TTL, refreshes it on read, never returns an expired item", async () => {
    const tenant = freshTenant("ttl");
    const ttlStore = new CscpStore(pool, { tenant, ttl: { defaultTtl: 1, refreshOnRead: true } });
    await ttlStore.put(["t"], "k", { data: "expires" });
    await age(tenant, 50_000);
    expect(await ttlStore.get(["t"], "k")).not.toBeNull(); // refreshed: another minute from now
    await age(tenant, 50_000);
    expect((await ttlStore.search(["t"])).length).toBe(1); // refreshed again
    await age(tenant, 50_000);
    expect(await ttlStore.get(["t"], "k", { refreshTtl: false })).not.toBeNull(); // not refreshed
    await age(tenant, 15_000);
    expect(await ttlStore.get(["t"], "k")).toBeNull();
    expect(await ttlStore.search(["t"])).toEqual([]);
    expect(await ttlStore.listNamespaces()).toEqual([]);
  });

  it("does not refresh on read when refreshOnRead is false", async () => {
    const tenant = freshTenant("ttl");
    const ttlStore = new CscpStore(pool, { tenant, ttl: { defaultTtl: 1, refreshOnRead: false } });
    await ttlStore.put(["t"], "k", { v: 1 });
    await age(tenant, 50_000);
    expect(await ttlStore.get(["t"], "k")).not.toBeNull();
    await age(tenant, 15_000);
    expect(await ttlStore.get(["t"], "k")).toBeNull();
  });

  it("keeps an item without TTL for good, and lets the sweep remove expired ones", async () => {
    const tenant = freshTenant("ttl");
    const ttlStore = new CscpStore(pool, { tenant });
    await ttlStore.put(["t"], "forever", { v: 1 });
    await ttlStore.put(["t"], "short", { v: 2 }, undefined, { ttl: 1 });
    await age(tenant, 120_000);
    expect((await ttlStore.search(["t"])).map((r) => r.key)).toEqual(["forever"]);
    await admin.query("SELECT cscp.sweep(1000)");
    const { rows } = await admin.query("SELECT key FROM cscp.store_item WHERE tenant_id = $1", [tenant]);
    expect(rows.map((r) => r.key)).toEqual(["forever"]);
  });
});

describe("tenants", () => {
  it("never shows one tenant's items to another", async () => {
    const a = new CscpStore(pool, { tenant: freshTenant("a") });
    const b = new CscpStore(pool, { tenant: freshTenant("b") });
    await a.put(["shared", "ns"], "k", { owner: "a" });
    expect(await b.get(["shared", "ns"], "k")).toBeNull();
    expect(await b.search(["shared"])).toEqual([]);
    expect(await b.listNamespaces()).toEqual([]);
    await b.put(["shared", "ns"], "k", { owner: "b" });
    expect((await a.get(["shared", "ns"], "k"))?.value).toEqual({ owner: "a" });
    await b.delete(["shared", "ns"], "k");
    expect((await a.get(["shared", "ns"], "k"))?.value).toEqual({ owner: "a" });
  });
});

describe("concurrency", () => {
  it("keeps every item of concurrent writers, and one value per key", async () => {
    await Promise.all(Array.from({ length: 40 }, (_, i) =>
      store.put(["conc"], `k${i % 10}`, { writer: i })));
    const items = await store.search(["conc"], { limit: 100 });
    expect(items.map((r) => r.key).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `k${i}`).sort());
  });
});
