import type { RouteOptions } from "fastify";

/**
 * Who may call a route (issue 32, part 1; STYLE.md, "Access where the route is declared"):
 * - `open`: anyone (`/health`);
 * - `api_keys`: a key of `auth.api_keys` when keys are configured (every `/v1` route, the `/sessions` pages);
 * - `metrics`: as `metrics.access` says (`open` or `api_keys`).
 *
 * Every route declares one in its registration's `config.access`; the access hook of app.ts reads it from the route
 * that matched (`request.routeOptions.config.access`), after fastify's router decoded the path, so no spelling of a
 * path can reach a route with another route's access.
 */
export type RouteAccess = "open" | "api_keys" | "metrics";

declare module "fastify" {
  interface FastifyContextConfig {
    /** The route's access: see {@link RouteAccess}. Required on every route (the route registry refuses one without). */
    access?: RouteAccess;
    /** The route answers a WebSocket upgrade of its path (the realtime endpoints): the upgrade handler serves it. */
    upgrade?: boolean;
  }
  interface FastifyInstance {
    /** Every route the app registered with its access (app.ts decorates it; tests walk it). */
    routeTable: () => readonly RegisteredRoute[];
  }
}

/** One registered route as the registry keeps it: method(s), the path pattern, its access. */
export interface RegisteredRoute {
  readonly method: string;
  readonly url: string;
  readonly access: RouteAccess;
  readonly upgrade: boolean;
}

/** Thrown at registration for a route that declares no access: a new route cannot be served unguarded. */
export class RouteAccessError extends Error {
  constructor(
    readonly method: string,
    readonly url: string,
  ) {
    super(
      `route ${method} ${url} declares no access: register it with config: { access: "open" | "api_keys" | "metrics" }`,
    );
    this.name = "RouteAccessError";
  }
}

/**
 * The list of routes an app registered, filled by its `onRoute` hook (`app.addHook("onRoute", registry.onRoute)`,
 * before any route). `onRoute` throws {@link RouteAccessError} for a route without `config.access`, so such a route
 * fails the app's start (and the test that builds it) instead of being served open.
 */
export const createRouteRegistry = () => {
  const routes: RegisteredRoute[] = [];
  return {
    onRoute(route: RouteOptions): void {
      const method = Array.isArray(route.method) ? route.method.join(",") : String(route.method);
      const access = route.config?.access;
      if (access === undefined) throw new RouteAccessError(method, route.url);
      routes.push({ method, url: route.url, access, upgrade: route.config?.upgrade === true });
    },
    /** Every route registered so far, in registration order (fastify's automatic HEAD routes included). */
    routes: (): readonly RegisteredRoute[] => routes,
  };
};

export type RouteRegistry = ReturnType<typeof createRouteRegistry>;
