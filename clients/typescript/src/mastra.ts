// bulkheadExecuteCode: a Mastra `executeCode` tool over bulkheadd. Calls of
// the same user (resourceId) and thread (threadId) share one sandbox, kept by
// the daemon under the key owner + conversation (OpenSession with reuse), so
// a conversation that continues in another app process, or after a restart,
// finds its variables and files. The per-owner cap and its LRU eviction, and
// the idle close, are the daemon's: every client and process sees the same.
// This process remembers only which sessions it used, to close them on
// disposeAll().
import { createTool } from "@mastra/core/tools";
import { z } from "zod";
import { BulkheadClient, type CellOutcome, type Tier } from "./client.js";
import { BulkheadError } from "./errors.js";

export interface BulkheadExecuteCodeOptions {
  client: BulkheadClient;
  /** Refuse a host whose verified tier is below this (default kernel). */
  minimumIsolation?: Tier;
  /** A sandbox with no call for this long is closed (default 10 minutes). */
  idleCloseMs?: number;
  /**
   * Sandboxes per user; the daemon enforces it (--max-sessions-per-owner),
   * so the tool checks on first use that the daemon's cap is this one.
   */
  maxSessionsPerOwner?: number;
  /** A cell's deadline (default: the daemon's). */
  timeoutMs?: number;
}

// The daemon's limits are 200 files and 4 MiB of them per cell.
const MAX_FILES = 200;
const MAX_FILE_CONTENT = 4 * 1024 * 1024;

export const executeCodeInput = z.object({
  code: z.string().describe("The code to run. The value of the last expression is returned."),
  language: z.enum(["python", "javascript"]).default("python"),
  files: z
    .array(
      z.object({
        path: z.string().min(1).describe("relative path in the working directory, no '..'"),
        content: z.string().max(MAX_FILE_CONTENT).describe("UTF-8 text"),
      }),
    )
    .max(MAX_FILES)
    .optional()
    .describe("Text files written into the working directory before the code runs"),
});

export const executeCodeOutput = z.object({
  stdout: z.string(),
  stderr: z.string(),
  exitCode: z.number(),
  timedOut: z.boolean(),
  /** repr of the last expression (not `value`: Mastra would show the model only that) */
  lastValue: z.string().optional(),
  /** the exception or exit, when the cell did not end normally */
  error: z.string().optional(),
  stateKept: z.boolean(),
  freshInterpreter: z.boolean(),
  freshSandbox: z.boolean(),
  tier: z.string(),
  stdoutTruncated: z.boolean(),
  stderrTruncated: z.boolean(),
  limitsHit: z.array(z.string()),
  /** PNG images the cell drew (matplotlib figures), base64 */
  charts: z.array(z.string()),
});
export type ExecuteCodeOutput = z.infer<typeof executeCodeOutput>;

const DESCRIPTION =
  "Run Python or JavaScript code in a secure sandbox (no network) and get its output. " +
  "State persists between calls in this conversation: variables, functions, imports, loaded " +
  "data and files in the working directory are still there on the next call, unless " +
  "freshSandbox or freshInterpreter says they were lost (then rebuild them). The value of the " +
  "last expression is returned as lastValue, as in a notebook. matplotlib figures left open " +
  "are returned as PNG charts. Pass input data as files.";

function errorText(o: CellOutcome): string | undefined {
  if (o.timedOut) return `the cell ran past its deadline and was stopped (exit ${o.exitCode})`;
  if (o.exitCode === 0) return undefined;
  const tail = o.stderr.trimEnd().split("\n").slice(-8).join("\n");
  return `exit ${o.exitCode}${tail ? `: ${tail}` : ""}`;
}

function shape(o: CellOutcome): ExecuteCodeOutput {
  return {
    stdout: o.stdout,
    stderr: o.stderr,
    exitCode: o.exitCode,
    timedOut: o.timedOut,
    lastValue: o.value,
    error: errorText(o),
    stateKept: o.stateKept,
    freshInterpreter: o.freshInterpreter,
    freshSandbox: o.freshSandbox,
    tier: o.tier,
    stdoutTruncated: o.stdoutTruncated,
    stderrTruncated: o.stderrTruncated,
    limitsHit: o.limitsHit,
    charts: o.images
      .filter((i) => i.mime === "image/png")
      .map((i) => Buffer.from(i.data).toString("base64")),
  };
}

/** What the model reads: output, last value, exception; charts by count only. */
export function modelView(o: ExecuteCodeOutput): string {
  const parts: string[] = [];
  if (o.freshSandbox) parts.push("[fresh sandbox: no earlier variables or files]");
  else if (o.freshInterpreter) parts.push("[fresh interpreter: earlier variables are gone]");
  if (o.stdout) parts.push(`stdout:\n${o.stdout}${o.stdoutTruncated ? "\n[stdout cut]" : ""}`);
  if (o.stderr) parts.push(`stderr:\n${o.stderr}${o.stderrTruncated ? "\n[stderr cut]" : ""}`);
  if (o.lastValue !== undefined) parts.push(`value: ${o.lastValue}`);
  if (o.error) parts.push(`error: ${o.error}`);
  if (o.limitsHit.length) parts.push(`limits hit: ${o.limitsHit.join(", ")}`);
  if (o.charts.length) parts.push(`${o.charts.length} chart(s) rendered and shown to the user`);
  if (parts.length === 0) parts.push("(no output)");
  return parts.join("\n");
}

/** Turns a client error into the tool's: says whether the call may be retried. */
function toolError(e: unknown): Error {
  if (!(e instanceof BulkheadError)) return e as Error;
  const msg = e.notDispatched
    ? `bulkhead refused the call before anything ran (${e.code}): ${e.message}. ` +
      "Nothing ran; the call may be retried."
    : `bulkhead lost track of the call (${e.code}): ${e.message}. The code may have run: ` +
      "check the sandbox's state before running it again.";
  const err = new Error(msg, { cause: e });
  err.name = "BulkheadToolError";
  return err;
}

export function bulkheadExecuteCode(opts: BulkheadExecuteCodeOptions) {
  const client = opts.client;
  const floor = opts.minimumIsolation ?? "kernel";
  const idleCloseMs = opts.idleCloseMs ?? 600_000;
  const perOwner = opts.maxSessionsPerOwner ?? 3;
  const used = new Map<string, string>(); // key -> session id, for disposeAll
  const queues = new Map<string, Promise<unknown>>(); // one call at a time per thread
  let checked: Promise<void> | undefined;

  const keyOf = (owner: string, conversation: string) => JSON.stringify([owner, conversation]);

  function checkDaemon(): Promise<void> {
    checked ??= client.describe().then((d) => {
      if (d.protocolVersion < 2)
        throw new BulkheadError(
          "unsupported",
          `bulkheadd speaks protocol ${d.protocolVersion}; sessions kept per thread need 2`,
          { notDispatched: true },
        );
      if (d.limits.maxSessionsPerOwner !== perOwner)
        throw new BulkheadError(
          "invalid_request",
          `the daemon keeps ${d.limits.maxSessionsPerOwner} sandboxes per user, this tool was ` +
            `configured for ${perOwner}: the daemon enforces the cap for every client, so start ` +
            `bulkheadd with --max-sessions-per-owner ${perOwner} (or pass ` +
            `maxSessionsPerOwner: ${d.limits.maxSessionsPerOwner})`,
          { notDispatched: true },
        );
    });
    checked.catch(() => (checked = undefined));
    return checked;
  }

  async function runKeyed(
    owner: string,
    conversation: string,
    input: z.infer<typeof executeCodeInput>,
  ): Promise<ExecuteCodeOutput> {
    // the daemon answers the thread's open session, or opens one (LRU eviction is its own)
    for (let attempt = 0; ; attempt++) {
      const s = await client.openSession({
        owner,
        conversation,
        minimumIsolation: floor,
        idleTimeoutMs: idleCloseMs,
        reuse: true,
      });
      used.set(keyOf(owner, conversation), s.sessionId);
      try {
        return shape(
          await client.runCell(s.sessionId, {
            language: input.language,
            code: input.code,
            files: input.files,
            timeoutMs: opts.timeoutMs,
          }),
        );
      } catch (e) {
        // ended between open and run (idle, evicted by another process): nothing ran
        if (e instanceof BulkheadError && e.notDispatched && attempt === 0 &&
            (e.code === "session_ended" || e.code === "not_found"))
          continue;
        throw e;
      }
    }
  }

  async function runFresh(input: z.infer<typeof executeCodeInput>): Promise<ExecuteCodeOutput> {
    const s = await client.openSession({
      owner: `bulkhead-mastra-anonymous-${crypto.randomUUID()}`,
      minimumIsolation: floor,
      idleTimeoutMs: idleCloseMs,
    });
    try {
      return shape(
        await client.runCell(s.sessionId, {
          language: input.language,
          code: input.code,
          files: input.files,
          timeoutMs: opts.timeoutMs,
        }),
      );
    } finally {
      await client.closeSession(s.sessionId).catch(() => undefined);
    }
  }

  function serialized<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = queues.get(key) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    queues.set(key, tail);
    void tail.then(() => {
      if (queues.get(key) === tail) queues.delete(key);
    });
    return run;
  }

  const executeCode = createTool({
    id: "executeCode",
    description: DESCRIPTION,
    inputSchema: executeCodeInput,
    outputSchema: executeCodeOutput,
    toModelOutput: (o: ExecuteCodeOutput) => ({ type: "text", value: modelView(o) }),
    execute: async (input, ctx) => {
      const owner = ctx?.agent?.resourceId;
      const conversation = ctx?.agent?.threadId;
      try {
        await checkDaemon();
        if (!owner || !conversation) return await runFresh(input);
        return await serialized(keyOf(owner, conversation), () =>
          runKeyed(owner, conversation, input),
        );
      } catch (e) {
        throw toolError(e);
      }
    },
  });

  /** Closes the sandbox of one user's thread, wherever it was opened. */
  async function dispose(threadId: string, resourceId: string): Promise<boolean> {
    const key = keyOf(resourceId, threadId);
    return serialized(key, async () => {
      used.delete(key);
      const open = await client.listSessions(resourceId);
      if (!open.some((s) => s.conversation === threadId)) return false;
      const s = await client.openSession({
        owner: resourceId,
        conversation: threadId,
        reuse: true,
      });
      await client.closeSession(s.sessionId);
      return s.reused;
    });
  }

  /** Closes every sandbox this process used. */
  async function disposeAll(): Promise<void> {
    const ids = [...used.values()];
    used.clear();
    await Promise.all(ids.map((id) => client.closeSession(id).catch(() => undefined)));
  }

  return { executeCode, dispose, disposeAll };
}
