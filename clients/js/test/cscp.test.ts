// Cscp: the typed SQL API, the tenant per call with SET LOCAL, errors as CscpError.
import pg from "pg";
import { Cscp, CscpError } from "../src/index.js";
import { adminPool, freshTenant, prepare } from "./db.js";

let admin: pg.Pool;
let bound: pg.Pool;
const BOUND_ROLE = "cscp_js_bound";
const tenant = freshTenant("api");

beforeAll(async () => {
  await prepare();
  admin = adminPool();
  await admin.query(`DO $$ BEGIN CREATE ROLE ${BOUND_ROLE} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  await admin.query("SELECT cscp.grant_app($1, $2)", [BOUND_ROLE, [tenant]]);
  bound = new pg.Pool({ user: BOUND_ROLE, max: 2 });
});
afterAll(async () => {
  await bound.end();
  await admin.end();
});

describe("Cscp", () => {
  it("calls the API by name, with the tenant of the call", async () => {
    const cscp = new Cscp(bound);
    const ctx = await cscp.contextOpen({ tenant_id: tenant, conversation_id: "c-1", actor_id: "u-1", slots: { active_intent: "cancel_order" } });
    expect(ctx?.status).toBe("active");
    await cscp.docPut({ tenant_id: tenant, session_id: "s-1", namespace: "cart", payload: { items: [1, 2] }, ttl_seconds: 60 });
    expect(await cscp.docGet({ tenant_id: tenant, session_id: "s-1", namespace: "cart" })).toEqual({ items: [1, 2] });
  });

  it("fills in its own tenant when a call names none", async () => {
    const cscp = new Cscp(bound, { tenant });
    await cscp.storePut({ namespace: ["a"], key: "k", value: { v: 1 } });
    const [item] = await cscp.storeGet({ namespace: ["a"], key: "k" });
    expect(item.item_value).toEqual({ v: 1 });
  });

  it("raises CscpError with the SQLSTATE, detail and hint", async () => {
    const cscp = new Cscp(bound);
    const bad = await cscp.docPut({ tenant_id: tenant, session_id: "", namespace: "cart", payload: {}, ttl_seconds: 60 }).catch((e) => e);
    expect(bad).toBeInstanceOf(CscpError);
    expect(bad.sqlstate).toBe("22023");
    const other = await cscp.docGet({ tenant_id: "someone-else", session_id: "s", namespace: "n" }).catch((e) => e);
    expect(other).toBeInstanceOf(CscpError);
    expect(other.sqlstate).toBe("42501");
    expect(other.detail).toMatch(/bound to other tenants/);
  });

  it("runs several calls in one transaction", async () => {
    const cscp = new Cscp(bound, { tenant });
    await expect(cscp.transaction(async (q) => {
      await q("SELECT cscp.store_put($1, '{tx}', 'k', '{}')", [tenant]);
      throw new Error("abort");
    })).rejects.toThrow("abort");
    expect(await cscp.storeGet({ namespace: ["tx"], key: "k" })).toEqual([]);
  });
});
