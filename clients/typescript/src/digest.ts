// A run record's digest as bulkheadd computes it (supervisor/server.c,
// record_digest): SHA-256 over a fixed text of fields 1-14. The client
// recomputes it, so a record altered anywhere between the daemon and here
// is caught on the answer that carries it, not one cell later.
import { createHash } from "node:crypto";
import type { RunRecord } from "./gen/control_pb.js";

export function recordDigest(r: RunRecord): string {
  const text =
    "bulkhead-record-v1\n" +
    `cell=${r.cell}\nlanguage=${r.language}\nstarted=${r.startedAtUnixMs}\n` +
    `queue=${r.queueMs}\nrun=${r.runMs}\ntotal=${r.totalMs}\ntimeout=${r.timeoutMs}\n` +
    `memory=${r.memoryBytes}\npids=${r.pids}\noutput=${r.outputBytes}\n` +
    `disk=${r.diskBytes}\ndisk_used=${r.diskUsedBytes}\nexit=${r.exitCode}\n` +
    `previous=${r.previousDigest}\n`;
  return createHash("sha256").update(text, "utf8").digest("hex");
}
