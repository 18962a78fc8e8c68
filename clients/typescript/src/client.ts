// BulkheadClient: bulkheadd's control protocol over its unix socket, with
// the wire code generated from proto/control.proto (src/gen, made by
// `npm run gen`). One request in flight per connection (the daemon answers a
// connection's requests in order); concurrent calls take further connections
// from a small pool. Every answer is checked before it is handed out: the
// request id matches, the tier meets the floor asked for, and every run
// record recomputes to its digest and chains to the session's last one.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { connect, type Socket } from "node:net";
import {
  type CellResult,
  type DescribeResult,
  Error_Code,
  Error_Ended,
  type Request,
  RequestSchema,
  type Response,
  ResponseSchema,
} from "./gen/control_pb.js";
import { recordDigest } from "./digest.js";
import { BulkheadError, type BulkheadErrorCode, type EndedReason } from "./errors.js";

/** The daemon's default socket (oci/client.c and bulkheadd agree on it). */
export const DEFAULT_SOCKET = "/run/bulkhead/bulkheadd.sock";
/** The protocol this client speaks: 2 adds OpenSession.reuse. */
export const PROTOCOL_VERSION = 2;
/** The C client's answer limit; the daemon's own limit is learned from describe(). */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;

export const TIERS = ["none", "process", "container", "kernel", "vm"] as const;
export type Tier = (typeof TIERS)[number];

function tierRank(t: string): number {
  return (TIERS as readonly string[]).indexOf(t);
}

export interface ClientOptions {
  /** Default: $BULKHEADD_SOCKET, then /run/bulkhead/bulkheadd.sock. */
  socketPath?: string;
  /** Frames above this are refused both ways (default 64 MiB, or the daemon's limit once known). */
  maxFrameBytes?: number;
  /** How long an answer may take (default 10 minutes: a cell has its own deadline). */
  requestTimeoutMs?: number;
  /** Idle connections kept for the next call (default 4). */
  maxIdleConnections?: number;
}

export interface OpenSessionOptions {
  owner: string;
  conversation?: string;
  /** The lowest tier the caller accepts; a host below it refuses before anything runs. */
  minimumIsolation?: Tier;
  lifetimeMs?: number;
  idleTimeoutMs?: number;
  /** Answer the session already open for owner + conversation (protocol 2). */
  reuse?: boolean;
}

export interface OpenedSession {
  sessionId: string;
  fingerprint: string;
  tier: string;
  expiresAtUnixMs: number;
  idleTimeoutMs: number;
  warm: boolean;
  openMs: number;
  /** An open session of the same owner + conversation was answered. */
  reused: boolean;
}

export interface CellFile {
  path: string;
  content: string;
}

export interface RunCellOptions {
  language: "python" | "javascript";
  code: string;
  files?: CellFile[];
  timeoutMs?: number;
}

export interface RunRecordInfo {
  cell: number;
  language: string;
  startedAtUnixMs: number;
  queueMs: number;
  runMs: number;
  totalMs: number;
  timeoutMs: number;
  memoryBytes: number;
  pids: number;
  outputBytes: number;
  diskBytes: number;
  diskUsedBytes: number;
  exitCode: number;
  previousDigest: string;
  digest: string;
}

export interface CellOutcome {
  stdout: string;
  stderr: string;
  stdoutTruncated: boolean;
  stderrTruncated: boolean;
  stdoutBytes: number;
  stderrBytes: number;
  exitCode: number;
  timedOut: boolean;
  /** repr of the last expression, when the cell ended with one */
  value?: string;
  stateKept: boolean;
  filesPersist: boolean;
  freshInterpreter: boolean;
  freshSandbox: boolean;
  tier: string;
  record: RunRecordInfo;
  images: { mime: string; data: Uint8Array }[];
  limitsHit: string[];
}

export interface DescribeInfo {
  host: string;
  version: string;
  tier: string;
  checks: { name: string; passed: boolean; detail: string }[];
  languages: string[];
  supportsSessions: boolean;
  protocolVersion: number;
  limits: Record<string, number>;
}

export interface SessionListing {
  fingerprint: string;
  conversation: string;
  calls: number;
  openedAtUnixMs: number;
  lastUsedUnixMs: number;
  expiresAtUnixMs: number;
  busy: boolean;
}

export interface DaemonStats {
  sessions: number;
  warmReady: number;
  calls: number;
  opened: number;
  closed: number;
  evicted: number;
  timedOut: number;
  uptimeMs: number;
  errors: number;
}

const CODE_NAMES: Record<number, BulkheadErrorCode> = {
  [Error_Code.INVALID_REQUEST]: "invalid_request",
  [Error_Code.UNSUPPORTED]: "unsupported",
  [Error_Code.DISABLED]: "disabled",
  [Error_Code.AT_CAPACITY]: "at_capacity",
  [Error_Code.NOT_FOUND]: "not_found",
  [Error_Code.SESSION_ENDED]: "session_ended",
  [Error_Code.FLOOR_NOT_MET]: "floor_not_met",
  [Error_Code.INTERNAL]: "internal",
};
const ENDED_NAMES: Record<number, EndedReason> = {
  [Error_Ended.IDLE]: "idle",
  [Error_Ended.LIFETIME]: "lifetime",
  [Error_Ended.CLOSED]: "closed",
  [Error_Ended.EVICTED]: "evicted",
  [Error_Ended.DISK_BUDGET]: "disk_budget",
  [Error_Ended.SANDBOX_DIED]: "sandbox_died",
  [Error_Ended.SHUTDOWN]: "shutdown",
};

const n = (v: bigint): number => Number(v);

/** One connection: frames in, frames out, one request at a time. */
class Connection {
  private chunks: Buffer[] = [];
  private have = 0;
  private waiting?: {
    resolve: (b: Uint8Array) => void;
    reject: (e: BulkheadError) => void;
    timer: NodeJS.Timeout;
  };
  dead = false;

  constructor(
    private readonly sock: Socket,
    private readonly maxFrame: () => number,
  ) {
    sock.on("data", (d: Buffer) => this.onData(d));
    sock.on("error", () => this.fail("the connection to bulkheadd failed"));
    sock.on("close", () => this.fail("bulkheadd closed the connection"));
  }

  private fail(why: string) {
    this.dead = true;
    const w = this.waiting;
    this.waiting = undefined;
    if (w) {
      clearTimeout(w.timer);
      w.reject(
        new BulkheadError(
          "connection_lost",
          `${why} before it answered: the request's fate is unknown (a cell may have run)`,
          { notDispatched: false },
        ),
      );
    }
  }

  private onData(d: Buffer) {
    this.chunks.push(d);
    this.have += d.length;
    if (this.have < 4) return;
    let buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.have);
    this.chunks = [buf];
    const len = buf.readUInt32BE(0);
    if (len > this.maxFrame()) {
      const w = this.waiting;
      this.waiting = undefined;
      this.dead = true;
      this.sock.destroy();
      if (w) {
        clearTimeout(w.timer);
        w.reject(
          new BulkheadError(
            "frame_too_large",
            `bulkheadd's answer is a frame of ${len} bytes, above this client's limit of ` +
              `${this.maxFrame()}: refused unread (the request may have run); raise maxFrameBytes`,
            { notDispatched: false },
          ),
        );
      }
      return;
    }
    if (this.have < 4 + len) return;
    const frame = buf.subarray(4, 4 + len);
    const rest = buf.subarray(4 + len);
    this.chunks = rest.length ? [rest] : [];
    this.have = rest.length;
    const w = this.waiting;
    this.waiting = undefined;
    if (!w) {
      this.dead = true;
      this.sock.destroy();
      return;
    }
    clearTimeout(w.timer);
    w.resolve(frame);
  }

  request(payload: Uint8Array, timeoutMs: number): Promise<Uint8Array> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting = undefined;
        this.dead = true;
        this.sock.destroy();
        reject(
          new BulkheadError(
            "timeout",
            `no answer from bulkheadd within ${timeoutMs} ms: the request's fate is unknown ` +
              "(a cell may have run)",
            { notDispatched: false },
          ),
        );
      }, timeoutMs);
      this.waiting = { resolve, reject, timer };
      const head = Buffer.allocUnsafe(4);
      head.writeUInt32BE(payload.length, 0);
      this.sock.write(Buffer.concat([head, payload]));
    });
  }

  close() {
    this.dead = true;
    this.sock.destroy();
  }
}

interface SessionTrack {
  floor: number;
  lastDigest: string;
  lastCell: bigint; // -1n: learned from the next record (a reused session)
  tail: Promise<unknown>; // cells of one session go one after another
}

export class BulkheadClient {
  readonly socketPath: string;
  private maxFrameBytes: number;
  private readonly requestTimeoutMs: number;
  private readonly maxIdle: number;
  private idle: Connection[] = [];
  private nextId = 1n;
  private closed = false;
  private sessions = new Map<string, SessionTrack>();

  constructor(opts: ClientOptions = {}) {
    this.socketPath = opts.socketPath ?? process.env.BULKHEADD_SOCKET ?? DEFAULT_SOCKET;
    this.maxFrameBytes = opts.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 600_000;
    this.maxIdle = opts.maxIdleConnections ?? 4;
  }

  /** Closes the idle connections; calls after this are refused. */
  close(): void {
    this.closed = true;
    for (const c of this.idle) c.close();
    this.idle = [];
  }

  private connect(): Promise<Connection> {
    return new Promise((resolve, reject) => {
      const sock = connect(this.socketPath);
      const onError = (e: Error) =>
        reject(
          new BulkheadError(
            "connect_failed",
            `cannot connect to bulkheadd at ${this.socketPath}: ${e.message}; nothing was sent ` +
              "(is bulkheadd running? set socketPath or $BULKHEADD_SOCKET)",
            { notDispatched: true, retryable: true },
          ),
        );
      sock.once("error", onError);
      sock.once("connect", () => {
        sock.off("error", onError);
        resolve(new Connection(sock, () => this.maxFrameBytes));
      });
    });
  }

  /** Sends one request and returns its checked answer body (errors thrown). */
  private async call(body: Request["body"]): Promise<Response["body"]> {
    if (this.closed)
      throw new BulkheadError("disabled", "this BulkheadClient is closed: nothing was sent", {
        notDispatched: true,
      });
    const requestId = this.nextId++;
    const req = create(RequestSchema, { version: PROTOCOL_VERSION, requestId, body });
    const bytes = toBinary(RequestSchema, req);
    if (bytes.length > this.maxFrameBytes)
      throw new BulkheadError(
        "frame_too_large",
        `the request is ${bytes.length} bytes, above the frame limit of ${this.maxFrameBytes}: ` +
          "refused before sending, nothing ran; send less code or fewer files",
        { notDispatched: true },
      );
    let conn: Connection | undefined;
    while ((conn = this.idle.pop()) && conn.dead);
    if (!conn) conn = await this.connect();
    const raw = await conn.request(bytes, this.requestTimeoutMs);
    if (!conn.dead && this.idle.length < this.maxIdle && !this.closed) this.idle.push(conn);
    else conn.close();
    let resp: Response;
    try {
      resp = fromBinary(ResponseSchema, raw);
    } catch (e) {
      conn.close();
      throw new BulkheadError(
        "protocol",
        `bulkheadd's answer is not a Response message (${(e as Error).message}): ` +
          "its fate is unknown",
        { notDispatched: false },
      );
    }
    if (resp.requestId !== requestId)
      throw new BulkheadError(
        "protocol",
        `bulkheadd answered request ${resp.requestId}, not ${requestId}: refused`,
        { notDispatched: false },
      );
    if (resp.body.case === "error") {
      const e = resp.body.value;
      throw new BulkheadError(CODE_NAMES[e.code] ?? "internal", e.message, {
        retryable: e.retryable,
        notDispatched: e.notDispatched,
        endedReason: ENDED_NAMES[e.endedReason],
      });
    }
    if (resp.body.case !== body.case)
      throw new BulkheadError(
        "protocol",
        `bulkheadd answered a ${body.case} request with ${resp.body.case ?? "nothing"}`,
        { notDispatched: false },
      );
    return resp.body;
  }

  async describe(): Promise<DescribeInfo> {
    const b = await this.call({ case: "describe", value: {} as never });
    const d = b.value as DescribeResult;
    const limits: Record<string, number> = {};
    if (d.limits)
      for (const [k, v] of Object.entries(d.limits))
        if (typeof v === "bigint" || typeof v === "number") limits[k] = Number(v);
    // requests above the daemon's own limit would only be refused there
    if (limits.maxFrameBytes && limits.maxFrameBytes < this.maxFrameBytes)
      this.maxFrameBytes = limits.maxFrameBytes;
    return {
      host: d.host,
      version: d.version,
      tier: d.tier?.tier ?? "",
      checks: (d.tier?.checks ?? []).map((c) => ({
        name: c.name,
        passed: c.passed,
        detail: c.detail,
      })),
      languages: [...d.languages],
      supportsSessions: d.supportsSessions,
      protocolVersion: d.protocolVersion,
      limits,
    };
  }

  async openSession(o: OpenSessionOptions): Promise<OpenedSession> {
    const floor = o.minimumIsolation ? tierRank(o.minimumIsolation) : 0;
    if (floor < 0)
      throw new BulkheadError(
        "invalid_request",
        `minimumIsolation \`${o.minimumIsolation}\` is not a tier (${TIERS.join(", ")}): nothing sent`,
        { notDispatched: true },
      );
    const b = await this.call({
      case: "openSession",
      value: {
        owner: o.owner,
        conversation: o.conversation ?? "",
        minimumIsolation: o.minimumIsolation ?? "",
        lifetimeMs: BigInt(o.lifetimeMs ?? 0),
        idleTimeoutMs: BigInt(o.idleTimeoutMs ?? 0),
        reuse: o.reuse ?? false,
      } as never,
    });
    const r = b.value as import("./gen/control_pb.js").OpenSessionResult;
    if (tierRank(r.tier) < floor) {
      // nothing ran in it yet: close it and say so
      await this.call({ case: "closeSession", value: { sessionId: r.sessionId } as never }).catch(
        () => undefined,
      );
      throw new BulkheadError(
        "tier_below_floor",
        `bulkheadd opened a session at tier \`${r.tier}\`, below the floor ` +
          `\`${o.minimumIsolation}\`: closed it, nothing ran`,
        { notDispatched: true },
      );
    }
    const prev = this.sessions.get(r.sessionId);
    this.sessions.set(r.sessionId, {
      floor: Math.max(floor, prev?.floor ?? 0),
      lastDigest: r.reused ? r.lastRecordDigest : "",
      lastCell: r.reused ? -1n : 0n,
      tail: prev?.tail ?? Promise.resolve(),
    });
    return {
      sessionId: r.sessionId,
      fingerprint: r.fingerprint,
      tier: r.tier,
      expiresAtUnixMs: n(r.expiresAtUnixMs),
      idleTimeoutMs: n(r.idleTimeoutMs),
      warm: r.warm,
      openMs: n(r.openMs),
      reused: r.reused,
    };
  }

  /** Runs one cell; cells of one session run one after another, in call order. */
  runCell(sessionId: string, cell: RunCellOptions): Promise<CellOutcome> {
    let t = this.sessions.get(sessionId);
    if (!t) {
      // a session opened elsewhere: its chain is taken up from this record
      t = { floor: 0, lastDigest: "", lastCell: -2n, tail: Promise.resolve() };
      this.sessions.set(sessionId, t);
    }
    const track = t;
    const run = track.tail.then(
      () => this.runChecked(sessionId, cell, track),
      () => this.runChecked(sessionId, cell, track),
    );
    track.tail = run.catch(() => undefined);
    return run;
  }

  private async runChecked(
    sessionId: string,
    cell: RunCellOptions,
    t: SessionTrack,
  ): Promise<CellOutcome> {
    let b: Response["body"];
    try {
      b = await this.call({
        case: "runCell",
        value: {
          sessionId,
          language: cell.language,
          code: cell.code,
          files: (cell.files ?? []).map((f) => ({ path: f.path, content: f.content })),
          timeoutMs: BigInt(cell.timeoutMs ?? 0),
        } as never,
      });
    } catch (e) {
      if (e instanceof BulkheadError && (e.code === "session_ended" || e.code === "not_found"))
        this.sessions.delete(sessionId);
      throw e;
    }
    const c = b.value as CellResult;
    if (tierRank(c.tier) < t.floor)
      throw new BulkheadError(
        "tier_below_floor",
        `the cell ran at tier \`${c.tier}\`, below this session's floor \`${TIERS[t.floor]}\`: ` +
          "its result is refused (the code ran)",
        { notDispatched: false },
      );
    const r = c.record;
    if (!r)
      throw new BulkheadError("chain_broken", "the cell's answer carries no run record (the code ran)", {
        notDispatched: false,
      });
    const digest = recordDigest(r);
    if (digest !== r.digest)
      throw new BulkheadError(
        "chain_broken",
        `run record ${r.cell} does not match its digest (${r.digest} claimed, ${digest} computed): ` +
          "the answer was altered; the code ran, its result is refused",
        { notDispatched: false },
      );
    const linked =
      t.lastCell === -2n ||
      (r.previousDigest === t.lastDigest && (t.lastCell === -1n || r.cell === t.lastCell + 1n));
    if (!linked)
      throw new BulkheadError(
        "chain_broken",
        `run record ${r.cell} names ${r.previousDigest || "no"} previous record, but this ` +
          `session's last record is ${t.lastDigest || "none"} (cell ${t.lastCell}): the chain is ` +
          "broken (an altered answer, or another client ran a cell in between); the code ran, " +
          "its result is refused",
        { notDispatched: false },
      );
    t.lastDigest = r.digest;
    t.lastCell = r.cell;
    return {
      stdout: c.stdout,
      stderr: c.stderr,
      stdoutTruncated: c.stdoutTruncated,
      stderrTruncated: c.stderrTruncated,
      stdoutBytes: n(c.stdoutBytes),
      stderrBytes: n(c.stderrBytes),
      exitCode: c.exitCode,
      timedOut: c.timedOut,
      value: c.hasValue ? c.value : undefined,
      stateKept: c.stateKept,
      filesPersist: c.filesPersist,
      freshInterpreter: c.freshInterpreter,
      freshSandbox: c.freshSandbox,
      tier: c.tier,
      record: {
        cell: n(r.cell),
        language: r.language,
        startedAtUnixMs: n(r.startedAtUnixMs),
        queueMs: n(r.queueMs),
        runMs: n(r.runMs),
        totalMs: n(r.totalMs),
        timeoutMs: n(r.timeoutMs),
        memoryBytes: n(r.memoryBytes),
        pids: n(r.pids),
        outputBytes: n(r.outputBytes),
        diskBytes: n(r.diskBytes),
        diskUsedBytes: n(r.diskUsedBytes),
        exitCode: r.exitCode,
        previousDigest: r.previousDigest,
        digest: r.digest,
      },
      images: c.images.map((i) => ({ mime: i.mime, data: i.data })),
      limitsHit: [...c.limitsHit],
    };
  }

  async closeSession(sessionId: string): Promise<{ calls: number; lastRecordDigest: string }> {
    try {
      const b = await this.call({ case: "closeSession", value: { sessionId } as never });
      const r = b.value as import("./gen/control_pb.js").CloseSessionResult;
      return { calls: n(r.calls), lastRecordDigest: r.lastRecordDigest };
    } finally {
      this.sessions.delete(sessionId);
    }
  }

  async listSessions(owner: string): Promise<SessionListing[]> {
    const b = await this.call({ case: "listSessions", value: { owner } as never });
    const r = b.value as import("./gen/control_pb.js").ListSessionsResult;
    return r.sessions.map((s) => ({
      fingerprint: s.fingerprint,
      conversation: s.conversation,
      calls: n(s.calls),
      openedAtUnixMs: n(s.openedAtUnixMs),
      lastUsedUnixMs: n(s.lastUsedUnixMs),
      expiresAtUnixMs: n(s.expiresAtUnixMs),
      busy: s.busy,
    }));
  }

  async stats(): Promise<DaemonStats> {
    const b = await this.call({ case: "stats", value: {} as never });
    const s = b.value as import("./gen/control_pb.js").StatsResult;
    return {
      sessions: s.sessions,
      warmReady: s.warmReady,
      calls: n(s.calls),
      opened: n(s.opened),
      closed: n(s.closed),
      evicted: n(s.evicted),
      timedOut: n(s.timedOut),
      uptimeMs: n(s.uptimeMs),
      errors: n(s.errors),
    };
  }
}
