import type { TestProject } from "vitest/node";
import { postgresBinaries, startPostgresCluster } from "../../src/cli/postgres-temp.ts";

declare module "vitest" {
  export interface ProvidedContext {
    /** The URL of the run's throwaway PostgreSQL server, or null where PostgreSQL is not installed. */
    postgresUrl: string | null;
  }
}

/**
 * vitest's global setup: one throwaway PostgreSQL server for the run (src/cli/postgres-temp.ts), its URL given to the
 * tests as `inject("postgresUrl")`; stopped and removed at the end. Where PostgreSQL is not installed, the URL is
 * null and the PostgreSQL tests say they were skipped (.ci/run installs it).
 */
export default async function setup(project: TestProject): Promise<() => void> {
  if (postgresBinaries() === null) {
    project.provide("postgresUrl", null);
    return () => undefined;
  }
  const cluster = await startPostgresCluster();
  project.provide("postgresUrl", cluster.url);
  return () => cluster.stop();
}
