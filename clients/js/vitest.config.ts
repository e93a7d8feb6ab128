import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    globals: true,
    include: ["test/**/*.test.ts"],
    testTimeout: 30000,
    hookTimeout: 30000,
    fileParallelism: false,
    // The validation suite ships as ESM that vitest must transform (its spec files use globals).
    server: { deps: { inline: ["@langchain/langgraph-checkpoint-validation"] } },
  },
});
