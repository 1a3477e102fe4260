import { describe, expect, it } from "vitest";
import { addressKey } from "../../src/server/address-key.ts";

describe("addressKey", () => {
  it.each([
    ["127.0.0.1", "127.0.0.1"],
    ["::ffff:10.0.0.1", "10.0.0.1"],
    ["::1", "0:0:0:0::/64"],
    ["2001:db8::5", "2001:db8:0:0::/64"],
    ["2001:db8:0:0:ffff::9", "2001:db8:0:0::/64"],
    ["2001:0db8:00aa:0001:1:2:3:4", "2001:db8:aa:1::/64"],
    ["fe80::1", "fe80:0:0:0::/64"],
    ["unknown", "unknown"],
  ])("counts %s as %s", (address, key) => {
    expect(addressKey(address)).toBe(key);
  });

  it("gives every address of one /64 the same key, and another /64 another", () => {
    expect(new Set(["2001:db8:1:2::1", "2001:db8:1:2:a:b:c:d", "2001:db8:1:2::ffff"].map(addressKey)).size).toBe(1);
    expect(addressKey("2001:db8:1:3::1")).not.toBe(addressKey("2001:db8:1:2::1"));
  });
});
