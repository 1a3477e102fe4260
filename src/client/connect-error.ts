/**
 * One line that says why a connection to a realtime endpoint failed and what to do about it (issue 9, "Errors that
 * say what to do"), for every command that connects (demo, conform). `error` is what `ws` raised: a Node.js socket
 * error (`code` ECONNREFUSED, ENOTFOUND, ECONNRESET, a TLS code), or "Unexpected server response: STATUS".
 */
export const explainConnectError = (url: string, error: unknown, sentKey = false): string => {
  const e = error as NodeJS.ErrnoException & { message?: string };
  const message = e?.message ?? String(error);
  let where = url;
  try {
    const u = new URL(url);
    where = `${u.hostname}:${u.port || (u.protocol === "wss:" ? "443" : "80")}`;
  } catch {
    return `${url} is not a URL: give ws://HOST:PORT/v1/realtime (or wss://)`;
  }
  const status = /Unexpected server response: (\d+)/.exec(message)?.[1];
  if ((status === "401" || status === "403") && sentKey)
    return `${url}: HTTP ${status}, the server refused that API key: check --api-key (or OPENAI_API_KEY)`;
  if (status === "401" || status === "403")
    return `${url}: HTTP ${status}, the server needs an API key: pass --api-key KEY (or set OPENAI_API_KEY)`;
  if (status === "404") return `${url}: HTTP 404, nothing there: the realtime endpoint is ws://${where}/v1/realtime`;
  if (status !== undefined) return `${url}: the server answered HTTP ${status} instead of a WebSocket upgrade`;
  switch (e?.code) {
    case "ECONNREFUSED":
      return `nothing listens at ${where}: start the server (npm start) or pass --url`;
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return `${where}: the host name does not resolve; check --url`;
    case "DEPTH_ZERO_SELF_SIGNED_CERT":
    case "SELF_SIGNED_CERT_IN_CHAIN":
    case "UNABLE_TO_VERIFY_LEAF_SIGNATURE":
    case "UNABLE_TO_GET_ISSUER_CERT_LOCALLY":
      return `${url}: the server's TLS certificate is not trusted (${e.code}): set NODE_EXTRA_CA_CERTS=ca.pem to trust its CA`;
    case "ERR_SSL_WRONG_VERSION_NUMBER":
    case "EPROTO":
      return `${url}: the server does not speak TLS there: use ws:// instead of wss://`;
    case "ECONNRESET":
    case "HPE_INVALID_CONSTANT":
      return url.startsWith("ws:")
        ? `${url}: the connection was reset; if the server listens with TLS (listen.tls), use wss://`
        : `${url}: the connection was reset (${message})`;
    default:
      if (/parse error|Expected HTTP/i.test(message) && url.startsWith("ws:"))
        return `${url}: the answer was not HTTP; if the server listens with TLS (listen.tls), use wss://`;
      return `${url}: cannot connect (${message})`;
  }
};
