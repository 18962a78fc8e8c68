// The warm-cell round trip through this client against bulkheadd's C
// clients, in one run against one daemon, in alternating rounds:
//   ts     BulkheadClient.runCell (every answer checked: tier, digest, chain)
//   c      build/bench/sessions cells (the bench's C client, one connection)
//   cli    `bulkhead session run` (a process per cell, as a shell user runs it)
//   paired the client and a bare Node socket (a pre-encoded request, no
//          checks), cell by cell on two sessions: what the client adds
// Prints p50/p99 of each, the client's own CPU per cell, and its overhead
// at the p50.
// Run: npm run bench [-- rounds cells-per-round] (default 40 rounds of 25 cells)
import { execFile } from "node:child_process";
import { connect } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { BulkheadClient, recordDigest, type CellOutcome } from "../index.js";
import { RequestSchema, ResponseSchema } from "../gen/control_pb.js";
import { buildDir, startDaemon } from "../test/daemon.js";

const run = promisify(execFile);
// many short rounds: the machine is shared, and its load moves within seconds
const rounds = Number(process.argv[2] ?? 40);
const cells = Number(process.argv[3] ?? 25);
const cliCells = Math.max(2, Math.floor(cells / 10));

const pct = (v: number[], p: number) => {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

/** A real answer, re-encoded, for the CPU measurement. */
function encodeAnswer(out: CellOutcome): Uint8Array {
  const r = out.record;
  const big = (v: number) => BigInt(v);
  return toBinary(
    ResponseSchema,
    create(ResponseSchema, {
      requestId: 1n,
      body: {
        case: "runCell",
        value: {
          value: out.value,
          hasValue: true,
          tier: out.tier,
          stateKept: true,
          filesPersist: true,
          record: {
            ...r,
            cell: big(r.cell),
            startedAtUnixMs: big(r.startedAtUnixMs),
            queueMs: big(r.queueMs),
            runMs: big(r.runMs),
            totalMs: big(r.totalMs),
            timeoutMs: big(r.timeoutMs),
            memoryBytes: big(r.memoryBytes),
            pids: big(r.pids),
            outputBytes: big(r.outputBytes),
            diskBytes: big(r.diskBytes),
            diskUsedBytes: big(r.diskUsedBytes),
          },
        },
      },
    }),
  );
}

/** The client's own CPU per cell, without the daemon: encode the request,
 * decode a real answer, recompute its record digest. */
function clientCpuMicros(answer: Uint8Array): number {
  const n = 20000;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) {
    const req = create(RequestSchema, {
      version: 2,
      requestId: BigInt(i),
      body: {
        case: "runCell",
        value: { sessionId: "0".repeat(32), language: "python", code: "1 + 1" },
      },
    });
    toBinary(RequestSchema, req);
    const r = fromBinary(ResponseSchema, answer);
    if (r.body.case === "runCell" && r.body.value.record) recordDigest(r.body.value.record);
  }
  return Number(process.hrtime.bigint() - t0) / 1e3 / n;
}

const build = buildDir();
const d = await startDaemon();
const client = new BulkheadClient({ socketPath: d.socket });
let answer: Uint8Array | undefined;
const ts: number[] = [];
const c: number[] = [];
const cli: number[] = [];
const tsPaired: number[] = [];
const rawPaired: number[] = [];
const cell = { language: "python" as const, code: "1 + 1" };
try {
  const cs = await client.openSession({ owner: "bench-cli", minimumIsolation: "kernel" });
  await client.runCell(cs.sessionId, cell);
  const runTs = async () => {
    // a session per round, its first cell not counted: as bench/sessions does
    const s = await client.openSession({ owner: "bench-ts", minimumIsolation: "kernel" });
    await client.runCell(s.sessionId, cell);
    for (let i = 0; i < cells; i++) {
      const t0 = process.hrtime.bigint();
      const out = await client.runCell(s.sessionId, cell);
      ts.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (out.value !== "2") throw new Error(`unexpected value ${out.value}`);
      answer ??= encodeAnswer(out);
    }
    await client.closeSession(s.sessionId);
  };
  const runC = async () => {
    const { stdout } = await run(join(build, "bench/sessions"), [
      "--socket", d.socket, "cells", "--lang", "python", "--reps", String(cells),
    ]);
    c.push(...(JSON.parse(stdout) as { warm_ms: number[] }).warm_ms);
  };
  const runCli = async () => {
    for (let i = 0; i < cliCells; i++) {
      const t0 = process.hrtime.bigint();
      await run(join(build, "bulkhead"), [
        "session", "run", "--socket", d.socket, cs.sessionId, "--lang", "python", "-c", "1 + 1",
      ]);
      cli.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
  };
  // Cell by cell against a bare Node socket sending a pre-encoded request
  // (no client at all) on a second session: what the client itself adds,
  // with the machine's load the same for both.
  const runPaired = async () => {
    const sa = await client.openSession({ owner: "bench-paired-client" });
    const sb = await client.openSession({ owner: "bench-paired-raw" });
    await client.runCell(sa.sessionId, cell);
    await client.runCell(sb.sessionId, cell);
    const body = toBinary(
      RequestSchema,
      create(RequestSchema, {
        version: 2,
        requestId: 1n,
        body: { case: "runCell", value: { sessionId: sb.sessionId, ...cell } },
      }),
    );
    const frame = Buffer.alloc(4 + body.length);
    frame.writeUInt32BE(body.length, 0);
    frame.set(body, 4);
    const sock = connect(d.socket);
    await new Promise((r) => sock.once("connect", r));
    let buf = Buffer.alloc(0);
    let done: () => void = () => undefined;
    sock.on("data", (x: Buffer) => {
      buf = Buffer.concat([buf, x]);
      if (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
        buf = Buffer.alloc(0);
        done();
      }
    });
    for (let i = 0; i < 2 * cells; i++) {
      const t0 = process.hrtime.bigint();
      if (i % 2) await new Promise<void>((res) => ((done = res), sock.write(frame)));
      else await client.runCell(sa.sessionId, cell);
      (i % 2 ? rawPaired : tsPaired).push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    sock.destroy();
    await client.closeSession(sa.sessionId);
    await client.closeSession(sb.sessionId);
  };
  // the order alternates, so neither client always follows the CLI's process churn
  for (let r = 0; r < rounds; r++) {
    await runPaired();
    await runCli();
    if (r % 2 === 0) {
      await runTs();
      await runC();
    } else {
      await runC();
      await runTs();
    }
  }
  await client.closeSession(cs.sessionId);
} finally {
  client.close();
  await d.stop();
}
const row = (name: string, v: number[]) =>
  `${name.padEnd(34)} n=${String(v.length).padStart(5)}  p50 ${pct(v, 50).toFixed(3)} ms  p99 ${pct(v, 99).toFixed(3)} ms`;
console.log(`warm Python cell "1 + 1", kernel tier, ${rounds} alternating rounds, node ${process.version}`);
console.log(row("TypeScript BulkheadClient", ts));
console.log(row("C client (bench/sessions)", c));
console.log(row("C CLI (bulkhead session run)", cli));
console.log(row("paired: TypeScript BulkheadClient", tsPaired));
console.log(row("paired: bare Node socket, no client", rawPaired));
console.log(`client overhead at p50, paired cell by cell with a bare socket: ${(pct(tsPaired, 50) - pct(rawPaired, 50)).toFixed(3)} ms`);
console.log(`client CPU per cell (encode, decode, digest; no I/O): ${clientCpuMicros(answer!).toFixed(1)} µs`);
console.log(`client overhead at p50 vs the C client: ${(pct(ts, 50) - pct(c, 50)).toFixed(3)} ms`);
