// Resumes an interrupted thread in a process of its own: node test/resume.mjs CONN TENANT THREAD ANSWER
import { Command } from "@langchain/langgraph";
import { CscpSaver } from "../dist/index.js";
import { buildGraph } from "./graph-def.mjs";

const [conn, tenant, thread, answer] = process.argv.slice(2);
const saver = CscpSaver.fromConnString(conn, { tenant });
try {
  await saver.setup();
  const graph = buildGraph(saver);
  const result = await graph.invoke(new Command({ resume: answer }), { configurable: { thread_id: thread } });
  process.stdout.write(JSON.stringify(result));
} finally {
  await saver.end();
}
