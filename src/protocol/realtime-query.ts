/**
 * Query parameters of the realtime endpoint (reference, "Endpoint and transport"): `model`, `autostart` (0: the
 * socket only resumes), `native_duplex` (deprecated alias `minicpmo45_native_duplex`). `duplex` (1 or 0) is
 * accepted; this server has one handler. `session_id` and `resume` are accepted and ignored: ids are the server's,
 * and a resume is the `session.resume` event.
 */
export interface RealtimeQuery {
  readonly model?: string;
  readonly autostart?: boolean;
  readonly nativeDuplex?: boolean;
}

/** A flag's value: absent is undefined; `0`, `false`, `no` and `off` (any case) are false; anything else true. */
const flag = (value: string | null): boolean | undefined =>
  value === null ? undefined : !["0", "false", "no", "off"].includes(value.toLowerCase());

/** Reads the query parameters of an upgrade URL. */
export const readRealtimeQuery = (params: URLSearchParams): RealtimeQuery => {
  const model = params.get("model");
  const autostart = flag(params.get("autostart"));
  const nativeDuplex = flag(params.get("native_duplex") ?? params.get("minicpmo45_native_duplex"));
  return {
    ...(model === null || model === "" ? {} : { model }),
    ...(autostart === undefined ? {} : { autostart }),
    ...(nativeDuplex === undefined ? {} : { nativeDuplex }),
  };
};
