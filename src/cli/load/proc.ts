import { readFileSync } from "node:fs";

/**
 * A process's resources from Linux's /proc, read by the load bench from outside the process.
 * CPU is `utime + stime` of /proc/PID/stat (all its threads), in clock ticks of 1/100 s (Linux's USER_HZ).
 */
const TICKS_PER_S = 100;

/** CPU seconds process `pid` has used so far (user + system, all threads). @throws when /proc has no such pid. */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The command name (field 2) may hold spaces: fields are counted after its closing parenthesis.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
};

/** The resident memory of process `pid`, KiB (VmRSS of /proc/PID/status); NaN when it cannot be read. */
export const rssKib = (pid: number): number => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? Number.NaN);
  } catch {
    return Number.NaN;
  }
};

/** The resident memory of process `pid`, MiB to 0.1 (VmRSS); NaN when it cannot be read. */
export const rssMib = (pid: number): number => Math.round(rssKib(pid) / 102.4) / 10;

/** Samples a process's RSS every `everyMs`; `peakKib()` is the largest seen, `stop()` ends the sampling. */
export const sampleRss = (pid: number, everyMs: number): { peakKib(): number; stop(): void } => {
  let peak = rssKib(pid);
  const timer = setInterval(() => {
    const kib = rssKib(pid);
    if (kib > peak || Number.isNaN(peak)) peak = kib;
  }, everyMs);
  return {
    peakKib: () => peak,
    stop: () => clearInterval(timer),
  };
};

/** CPU use of a process over a span: `start()` then `cores()` = CPU seconds used / wall seconds between them. */
export const measureCpu = (pid: number): { cores(): { cores: number; wallS: number } } => {
  const cpu0 = cpuSeconds(pid);
  const t0 = performance.now();
  return {
    cores() {
      const wallS = (performance.now() - t0) / 1000;
      return { cores: (cpuSeconds(pid) - cpu0) / wallS, wallS };
    },
  };
};
