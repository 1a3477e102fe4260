/** The fastify server: the realtime WebSocket endpoint, health and models routes, and the embedded node's wiring. */
export * from "./app.ts";
export * from "./metrics.ts";
export * from "./realtime/routes.ts";
export * from "./realtime/socket.ts";
export * from "./realtime/socket-writer.ts";
export * from "./start.ts";
