// The Mastra executeCode tool through a real Agent with a scripted model,
// against a real bulkheadd at the kernel tier.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Agent } from "@mastra/core/agent";
import { BulkheadClient } from "../index.js";
import { bulkheadExecuteCode, type ExecuteCodeOutput } from "../mastra.js";
import { startDaemon, type TestDaemon } from "./daemon.js";
import { startProxy } from "./proxy.js";
import { scriptedModel, type ScriptedModel } from "./scripted-model.js";

let d: TestDaemon;
let client: BulkheadClient;
let tool: ReturnType<typeof bulkheadExecuteCode>;
let m: ScriptedModel;
let agent: Agent;

before(async () => {
  d = await startDaemon();
  client = new BulkheadClient({ socketPath: d.socket });
  tool = bulkheadExecuteCode({ client });
  m = scriptedModel();
  agent = new Agent({
    id: "analyst",
    name: "analyst",
    instructions: "Answer with code.",
    model: m.model as never,
    tools: { executeCode: tool.executeCode },
  });
});
after(async () => {
  await tool?.disposeAll();
  client?.close();
  await d?.stop();
});

/** One turn of user/thread: the model calls executeCode with code; the tool's output. */
async function turn(
  code: string,
  who?: { resource: string; thread: string },
  files?: { path: string; content: string }[],
): Promise<ExecuteCodeOutput> {
  m.next({ code, files });
  const r = await agent.generate("go", who ? { memory: who } : {});
  assert.equal(r.toolResults.length, 1, `one tool call, got ${JSON.stringify(r.toolResults)}`);
  return (r.toolResults[0] as unknown as { payload: { result: ExecuteCodeOutput } }).payload.result;
}

const alice = { resource: "alice", thread: "t1" };

describe("executeCode through a Mastra Agent", () => {
  test("turn 1 builds state and a file; turn 2 of the same thread uses both", async () => {
    const t1 = await turn(
      [
        "import csv",
        "rows = list(csv.DictReader(open('cities.csv')))",
        "def warmest(rs):",
        "    return max(rs, key=lambda r: int(r['t']))['city']",
        "open('notes.txt', 'w').write('kept')",
        "print('loaded', len(rows))",
        "len(rows)",
      ].join("\n"),
      alice,
      [{ path: "cities.csv", content: "city,t\nOslo,3\nRome,18\nLima,15\n" }],
    );
    assert.equal(t1.exitCode, 0, t1.stderr);
    assert.equal(t1.lastValue, "3");
    assert.equal(t1.stdout, "loaded 3\n3\n"); // the last value is printed, as in a notebook
    assert.equal(t1.freshSandbox, true);
    assert.equal(t1.tier, "kernel");
    assert.match(m.seen.at(-1)!, /value: 3/);
    assert.match(m.seen.at(-1)!, /loaded 3/);

    const t2 = await turn("warmest(rows) + ':' + open('notes.txt').read()", alice);
    assert.equal(t2.lastValue, "'Rome:kept'");
    assert.equal(t2.freshSandbox, false);
    assert.equal(t2.freshInterpreter, false);
    assert.equal(t2.stateKept, true);
    assert.match(m.seen.at(-1)!, /value: 'Rome:kept'/);
  });

  test("an exception is shown to the model", async () => {
    const t = await turn("undefined_name + 1", alice);
    assert.equal(t.exitCode, 1);
    assert.match(t.error!, /NameError/);
    assert.match(m.seen.at(-1)!, /error: exit 1:[\s\S]*NameError/);
  });

  test("a second user with the same thread id sees neither state nor files", async () => {
    const t = await turn(
      "import os\n('rows' in globals(), 'warmest' in globals(), os.path.exists('notes.txt'))",
      { resource: "bob", thread: "t1" },
    );
    assert.equal(t.lastValue, "(False, False, False)");
    assert.equal(t.freshSandbox, true);
  });

  test("a second app process continues the same user's thread with its state", async () => {
    const here = fileURLToPath(new URL(".", import.meta.url));
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(here, "child-app.js"), d.socket, "alice", "t1", "warmest(rows)"],
      { timeout: 120_000 },
    );
    const child = JSON.parse(stdout) as { out: ExecuteCodeOutput; seen: string[] };
    assert.equal(child.out.lastValue, "'Rome'");
    assert.equal(child.out.freshSandbox, false);
    assert.match(child.seen[0], /value: 'Rome'/);
    // and this process goes on after it, on the same chain
    const back = await turn("len(rows)", alice);
    assert.equal(back.lastValue, "3");
  });

  test("dispose closes the thread's sandbox; the next call says freshSandbox", async () => {
    assert.equal(await tool.dispose("t1", "alice"), true);
    const t = await turn("'rows' in globals()", alice);
    assert.equal(t.lastValue, "False");
    assert.equal(t.freshSandbox, true);
    assert.match(m.seen.at(-1)!, /fresh sandbox/);
  });

  test("a fourth thread of a user evicts the least recently used", async () => {
    const carol = (thread: string) => ({ resource: "carol", thread });
    for (const t of ["a", "b", "c"]) {
      const r = await turn(`mark = '${t}'`, carol(t));
      assert.equal(r.freshSandbox, true);
    }
    await turn("mark", carol("a")); // b is now the least recently used
    await turn("mark", carol("c"));
    const dth = await turn("mark = 'd'", carol("d"));
    assert.equal(dth.freshSandbox, true);
    const b = await turn("'mark' in globals()", carol("b"));
    assert.equal(b.lastValue, "False");
    assert.equal(b.freshSandbox, true);
    const a = await turn("mark", carol("d"));
    assert.equal(a.lastValue, "'d'");
    assert.equal((await client.listSessions("carol")).length, 3);
  });

  test("without a thread every call gets a fresh sandbox, closed after", async () => {
    const one = await turn("y = 1\ny");
    assert.equal(one.lastValue, "1");
    const two = await turn("'y' in globals()");
    assert.equal(two.lastValue, "False");
    assert.equal(two.freshSandbox, true);
    const open = (await client.stats()).sessions;
    const listed = (await client.listSessions("alice")).length + (await client.listSessions("bob")).length + (await client.listSessions("carol")).length;
    assert.equal(open, listed, "no anonymous sandbox stays open");
  });

  test("a matplotlib chart comes back as a PNG in charts", async () => {
    const t = await turn(
      [
        "import matplotlib.pyplot as plt",
        "fig = plt.figure(figsize=(4, 3), dpi=50)",
        "plt.plot([t for t in range(5)], [t * t for t in range(5)])",
        "'plotted'",
      ].join("\n"),
      { resource: "dana", thread: "charts" },
    );
    assert.equal(t.exitCode, 0, t.stderr);
    assert.equal(t.charts.length, 1);
    const png = Buffer.from(t.charts[0], "base64");
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(png.subarray(12, 16).toString("latin1"), "IHDR");
    assert.equal(png.readUInt32BE(16), 200);
    assert.equal(png.readUInt32BE(20), 150);
    assert.match(m.seen.at(-1)!, /1 chart\(s\)/);
    assert.ok(!m.seen.at(-1)!.includes(t.charts[0].slice(0, 40)), "the model is not sent the PNG");
  });

  test("a refusal before anything ran says the call may be retried", async () => {
    const strict = bulkheadExecuteCode({ client, minimumIsolation: "vm" });
    await assert.rejects(
      strict.executeCode.execute!({ code: "1", language: "python" }, {
        agent: { threadId: "t", resourceId: "erin" },
      } as never),
      (e: Error) => {
        assert.match(e.message, /before anything ran/);
        assert.match(e.message, /may be retried/);
        assert.match(e.message, /floor_not_met/);
        return true;
      },
    );
  });

  test("a lost answer says the code may have run", async () => {
    const proxyPath = join(d.dir, "lost.sock");
    const proxy = await startProxy(proxyPath, d.socket, (r) => (r.body.case === "runCell" ? null : r));
    const lossy = new BulkheadClient({ socketPath: proxyPath });
    const t = bulkheadExecuteCode({ client: lossy });
    try {
      await assert.rejects(
        t.executeCode.execute!({ code: "ran = True", language: "python" }, {
          agent: { threadId: "t", resourceId: "frank" },
        } as never),
        (e: Error) => {
          assert.match(e.message, /may have run/);
          return true;
        },
      );
      const s = await client.openSession({ owner: "frank", conversation: "t", reuse: true });
      assert.equal(s.reused, true);
      assert.equal((await client.runCell(s.sessionId, { language: "python", code: "ran" })).value, "True");
      await client.closeSession(s.sessionId);
    } finally {
      lossy.close();
      await new Promise((r) => proxy.close(r));
    }
  });

  test("a daemon whose per-user cap differs from the tool's is refused with the fix", async () => {
    const other = bulkheadExecuteCode({ client, maxSessionsPerOwner: 5 });
    await assert.rejects(
      other.executeCode.execute!({ code: "1", language: "python" }, {
        agent: { threadId: "t", resourceId: "gina" },
      } as never),
      /--max-sessions-per-owner 5/,
    );
  });
});
