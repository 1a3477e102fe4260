import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores on CI machines: keep parallel test files to two.
    maxWorkers: 2,
    // The commands the tests spawn run the compiled dist/: build it first. A throwaway PostgreSQL for the run.
    globalSetup: ["test/support/build.ts", "test/support/postgres.ts"],
    // One run schedules both projects on the same two workers, so the chain's files fill the other worker's idle
    // time instead of running after everything else (issue 19, part 5: npm test's wall time).
    projects: [
      { extends: true, test: { name: "all", include: ["test/**/*.test.ts", "src/**/*.unit.test.ts"] } },
      {
        // The stock clients again, each through a chain (a server whose upstream runner drives another server).
        extends: true,
        test: { name: "chain", include: ["test/clients/**/*.test.ts"], env: { DUPLEX_TEST_CHAIN: "1" } },
      },
    ],
  },
});
