import { configDefaults, defineConfig } from "vitest/config";

/**
 * Files run after all others, alone: the stock clients' grades (the README's client table) include a wall-clock
 * bound (a barge-in's report within 2 s of the cut) that four clients and their peers in one process, about a core
 * of their own, meet by a wide margin on a quiet machine (under 0.2 s) and missed in CI beside another heavy file.
 */
const ALONE = ["test/conformance/stock-clients.test.ts"];

/**
 * The slow end-to-end groups (issue 34, part 6): the stock clients (each through a chain too), the browser, the
 * cluster's processes, the chaos run, client grading, the demo's and the benchmarks' commands. They run in a second
 * project that CI runs after the quick one (`npm run test:slow`, .ci/run), so that `npm test` stays within minutes.
 */
const SLOW = [
  "test/clients/**/*.test.ts",
  "test/conformance/chain.test.ts",
  "test/conformance/client-grading.test.ts",
  "test/e2e/timeline-browser.test.ts",
  "test/e2e/cluster.e2e.test.ts",
  "test/e2e/chaos.e2e.test.ts",
  "test/cli/demo-cli.test.ts",
  "test/cli/bench.test.ts",
  "test/cli/bench-load.test.ts",
];

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
      {
        extends: true,
        test: {
          name: "quick",
          include: ["test/**/*.test.ts", "src/**/*.unit.test.ts"],
          exclude: [...configDefaults.exclude, ...ALONE, ...SLOW],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: { name: "slow", include: SLOW, sequence: { groupOrder: 0 } },
      },
      {
        // The stock clients again, each through a chain (a server whose upstream runner drives another server).
        extends: true,
        test: {
          name: "chain",
          include: ["test/clients/**/*.test.ts"],
          env: { DUPLEX_TEST_CHAIN: "1" },
          sequence: { groupOrder: 0 },
        },
      },
      {
        // After the rest, on a quiet machine: see ALONE.
        extends: true,
        test: { name: "alone", include: [...ALONE], sequence: { groupOrder: 1 } },
      },
    ],
  },
});
