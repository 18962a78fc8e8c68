// A real bulkheadd for the tests: started at the kernel tier on a private
// socket in a temp dir, ended by its pid. A host that cannot verify the
// kernel tier fails the tests (never a skip): what they test needs it.
import { spawn, type ChildProcess } from "node:child_process";
import { connect } from "node:net";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));

/** BULKHEAD_BUILD, else the repository's build/ (clients/typescript/dist/test -> ../../../../build). */
export function buildDir(): string {
  const dir = process.env.BULKHEAD_BUILD ?? resolve(here, "../../../../build");
  if (!existsSync(join(dir, "bulkheadd")))
    throw new Error(
      `no bulkheadd in ${dir}: build it first (make, in the repository root) or set BULKHEAD_BUILD`,
    );
  return dir;
}

export interface TestDaemon {
  socket: string;
  dir: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

function canConnect(path: string): Promise<boolean> {
  return new Promise((res) => {
    const s = connect(path);
    s.once("connect", () => {
      s.destroy();
      res(true);
    });
    s.once("error", () => res(false));
  });
}

export async function startDaemon(extra: string[] = []): Promise<TestDaemon> {
  const build = buildDir();
  const dir = mkdtempSync(join(tmpdir(), "bhd-ts-"));
  const socket = join(dir, "s.sock");
  const args = [
    "--socket",
    socket,
    "--tier",
    "kernel",
    "--audit",
    join(dir, "audit.log"),
    "--warm",
    "0",
    ...extra,
  ];
  const errPath = join(dir, "err.log");
  const { openSync } = await import("node:fs");
  const errFd = openSync(errPath, "w");
  const proc = spawn(join(build, "bulkheadd"), args, { stdio: ["ignore", "ignore", errFd] });
  let exited: number | null = null;
  proc.on("exit", (code, sig) => (exited = code ?? (sig ? 128 : 1)));
  // a test process that dies without stop() (an uncaught error) takes its daemon along
  const reap = () => {
    if (exited === null) proc.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  };
  process.once("exit", reap);
  const stop = async () => {
    if (exited === null) {
      proc.kill("SIGTERM");
      const t = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      await new Promise((r) => (exited !== null ? r(null) : proc.once("exit", r)));
      clearTimeout(t);
    }
    rmSync(dir, { recursive: true, force: true });
    process.off("exit", reap);
  };
  for (let i = 0; i < 600; i++) {
    if (await canConnect(socket)) return { socket, dir, proc, stop };
    if (exited !== null) {
      const why = readFileSync(errPath, "utf8");
      await stop();
      throw new Error(`bulkheadd refused to start at the kernel tier (the tests need it): ${why}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await stop();
  throw new Error("bulkheadd did not listen within 30 s");
}
