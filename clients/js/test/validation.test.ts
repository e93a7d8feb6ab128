// LangGraph's own conformance suite for checkpointers, run against CscpSaver: every test of
// validate(), and the opt-in per-channel delta history tests, on a new tenant each time.
import { validate, deltaChannelHistoryTests } from "@langchain/langgraph-checkpoint-validation";
import type pg from "pg";
import { CscpSaver } from "../src/index.js";
import { appPool, freshTenant, prepare } from "./db.js";

let pool: pg.Pool;

const initializer = {
  checkpointerName: "CscpSaver",
  async beforeAll() {
    await prepare();
    pool = appPool();
  },
  beforeAllTimeout: 30000,
  async afterAll() {
    await pool.end();
  },
  async createCheckpointer() {
    const saver = new CscpSaver(pool, { tenant: freshTenant("validate") });
    await saver.setup();
    return saver;
  },
};

validate(initializer);
deltaChannelHistoryTests(initializer);
