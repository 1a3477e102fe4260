import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** A throwaway self-signed certificate: the files for `listen.tls`, the PEM to trust in the client, and cleanup. */
export interface TestCertificate {
  /** Paths for the deploy config's `listen.tls`. */
  readonly files: { readonly cert: string; readonly key: string };
  /** The certificate (PEM), to pass as the client's `ca`. */
  readonly ca: Buffer;
  /** Removes the temp folder. */
  remove(): Promise<void>;
}

/**
 * Generates an RSA 2048 self-signed certificate valid for one day, for `localhost` and `127.0.0.1` (subjectAltName,
 * so a client that trusts it through `ca` also passes hostname verification), with the machine's `openssl`.
 * @throws the child process error when `openssl` is missing or fails (its stderr is in the message).
 */
export const createTestCertificate = async (): Promise<TestCertificate> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-tls-"));
  const cert = join(dir, "cert.pem");
  const key = join(dir, "key.pem");
  try {
    await run("openssl", [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost,IP:127.0.0.1",
      "-days",
      "1",
      "-keyout",
      key,
      "-out",
      cert,
    ]);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    files: { cert, key },
    ca: await readFile(cert),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
};
