import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts", "src/**/*.unit.test.ts"],
    // The commands the tests spawn run the compiled dist/: build it first.
    globalSetup: ["test/support/build.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores on CI machines: keep parallel test files to two.
    maxWorkers: 2,
  },
});
