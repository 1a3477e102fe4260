import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.unit.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores on CI machines: keep parallel test files to two.
    maxWorkers: 2,
  },
});
