import { isIPv6 } from "node:net";

/**
 * The key an address is counted under by the auth lockout and the per-address socket cap: an IPv4 address as it
 * is; an IPv6 address by its /64 prefix, since one host is commonly given a whole /64 and could otherwise rotate
 * through 2^64 addresses, each with a fresh count. IPv4-mapped IPv6 (`::ffff:10.0.0.1`) counts as its IPv4 address.
 *
 * @param address an IP address as Node reports it (`127.0.0.1`, `::1`, `2001:db8::5`, `::ffff:10.0.0.1`), or any
 *   other string (`unknown`), which is its own key.
 * @returns `10.0.0.1`, `2001:db8:0:0::/64`, ...
 */
export const addressKey = (address: string): string => {
  if (!isIPv6(address)) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped?.[1] !== undefined) return mapped[1];
  const [head = "", tail = ""] = address.toLowerCase().split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === "" ? [] : tail.split(":");
  const groups = address.includes("::")
    ? [...left, ...Array(8 - left.length - right.length).fill("0"), ...right]
    : left;
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ""))
    .join(":")}::/64`;
};
