// BulkheadClient against a real bulkheadd at the kernel tier.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { BulkheadClient, BulkheadError } from "../index.js";
import { startDaemon, type TestDaemon } from "./daemon.js";
import { startProxy } from "./proxy.js";

let d: TestDaemon;
let client: BulkheadClient;

before(async () => {
  d = await startDaemon();
  client = new BulkheadClient({ socketPath: d.socket });
});
after(async () => {
  client?.close();
  await d?.stop();
});

async function rejects(p: Promise<unknown>, check: (e: BulkheadError) => void) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof BulkheadError, `not a BulkheadError: ${e}`);
    check(e);
    return;
  }
  assert.fail("expected a BulkheadError");
}

describe("BulkheadClient", () => {
  test("describe names the verified kernel tier, protocol 2 and the limits", async () => {
    const info = await client.describe();
    assert.equal(info.host, "bulkheadd");
    assert.equal(info.tier, "kernel");
    assert.equal(info.protocolVersion, 2);
    assert.ok(info.checks.filter((c) => c.passed).length > 5, "the checks behind the tier");
    assert.deepEqual([...info.languages].sort(), ["javascript", "python"]);
    assert.equal(info.limits.maxSessionsPerOwner, 3);
  });

  test("open, run in both languages, list, stats, close; the chain holds", async () => {
    const s = await client.openSession({
      owner: "ts-alice",
      conversation: "c1",
      minimumIsolation: "kernel",
      idleTimeoutMs: 60_000,
    });
    assert.equal(s.sessionId.length, 32);
    assert.equal(s.tier, "kernel");
    assert.equal(s.reused, false);
    const a = await client.runCell(s.sessionId, {
      language: "python",
      code: "x = 20\nprint('hi')",
      files: [{ path: "data/in.txt", content: "22" }],
    });
    assert.equal(a.stdout, "hi\n");
    assert.equal(a.exitCode, 0);
    assert.equal(a.freshSandbox, true);
    assert.equal(a.record.cell, 1);
    assert.equal(a.record.previousDigest, "");
    const b = await client.runCell(s.sessionId, {
      language: "python",
      code: "x + int(open('data/in.txt').read())",
    });
    assert.equal(b.value, "42");
    assert.equal(b.stateKept, true);
    assert.equal(b.freshInterpreter, false);
    assert.equal(b.record.previousDigest, a.record.digest);
    const js = await client.runCell(s.sessionId, { language: "javascript", code: "6 * 7" });
    assert.equal(js.value, "42");
    const raised = await client.runCell(s.sessionId, { language: "python", code: "1/0" });
    assert.equal(raised.exitCode, 1);
    assert.match(raised.stderr, /ZeroDivisionError/);
    const list = await client.listSessions("ts-alice");
    assert.equal(list.length, 1);
    assert.equal(list[0].conversation, "c1");
    assert.equal(list[0].calls, 4);
    const st = await client.stats();
    assert.ok(st.calls >= 4 && st.sessions >= 1);
    const closed = await client.closeSession(s.sessionId);
    assert.equal(closed.calls, 4);
    assert.equal(closed.lastRecordDigest, raised.record.digest);
    await rejects(client.runCell(s.sessionId, { language: "python", code: "1" }), (e) => {
      assert.equal(e.code, "session_ended");
      assert.equal(e.endedReason, "closed");
      assert.equal(e.notDispatched, true);
    });
  });

  test("typed errors: not_found, invalid_request, connect_failed", async () => {
    await rejects(
      client.runCell("0123456789abcdef0123456789abcdef", { language: "python", code: "1" }),
      (e) => {
        assert.equal(e.code, "not_found");
        assert.equal(e.notDispatched, true);
        assert.equal(e.retryable, false);
      },
    );
    await rejects(client.openSession({ owner: "" }), (e) => {
      assert.equal(e.code, "invalid_request");
      assert.match(e.message, /owner/);
    });
    await rejects(client.openSession({ owner: "x", reuse: true }), (e) => {
      assert.equal(e.code, "invalid_request");
      assert.match(e.message, /conversation/);
    });
    const nowhere = new BulkheadClient({ socketPath: join(d.dir, "nothing.sock") });
    await rejects(nowhere.describe(), (e) => {
      assert.equal(e.code, "connect_failed");
      assert.equal(e.notDispatched, true);
      assert.match(e.message, /nothing was sent/);
    });
  });

  test("a floor above the verified tier is refused with notDispatched", async () => {
    await rejects(client.openSession({ owner: "ts-floor", minimumIsolation: "vm" }), (e) => {
      assert.equal(e.code, "floor_not_met");
      assert.equal(e.notDispatched, true);
      assert.match(e.message, /nothing ran/);
    });
    assert.equal((await client.listSessions("ts-floor")).length, 0);
  });

  test("reuse answers the open session of owner + conversation, across clients", async () => {
    const other = new BulkheadClient({ socketPath: d.socket });
    try {
      const s1 = await client.openSession({ owner: "ts-bob", conversation: "t", reuse: true });
      const c1 = await client.runCell(s1.sessionId, { language: "python", code: "rows = [1, 2]" });
      const s2 = await other.openSession({ owner: "ts-bob", conversation: "t", reuse: true });
      assert.equal(s2.reused, true);
      assert.equal(s2.sessionId, s1.sessionId);
      const c2 = await other.runCell(s2.sessionId, { language: "python", code: "len(rows)" });
      assert.equal(c2.value, "2");
      assert.equal(c2.record.previousDigest, c1.record.digest);
      await other.closeSession(s2.sessionId);
    } finally {
      other.close();
    }
  });

  test("a run record altered in transit is detected, never a silent answer", async () => {
    const proxyPath = join(d.dir, "proxy.sock");
    let tamper = false;
    const proxy = await startProxy(proxyPath, d.socket, (r) => {
      if (tamper && r.body.case === "runCell" && r.body.value.record) {
        const rec = r.body.value.record;
        rec.digest = rec.digest.replace(/^./, (ch) => (ch === "0" ? "1" : "0"));
      }
      return r;
    });
    const c = new BulkheadClient({ socketPath: proxyPath });
    try {
      const s = await c.openSession({ owner: "ts-tamper", minimumIsolation: "kernel" });
      const ok = await c.runCell(s.sessionId, { language: "python", code: "1" });
      assert.equal(ok.value, "1");
      tamper = true;
      await rejects(c.runCell(s.sessionId, { language: "python", code: "2" }), (e) => {
        assert.equal(e.code, "chain_broken");
        assert.equal(e.notDispatched, false);
        assert.match(e.message, /altered/);
      });
      tamper = false;
      await c.closeSession(s.sessionId);
    } finally {
      c.close();
      await new Promise((r) => proxy.close(r));
    }
  });

  test("a record that skips a link of the chain is detected", async () => {
    const proxyPath = join(d.dir, "proxy2.sock");
    // hides one answer from the client: the next record chains to a record it never saw
    let hide = false;
    const proxy = await startProxy(proxyPath, d.socket, (r) => r);
    const c = new BulkheadClient({ socketPath: proxyPath });
    const direct = new BulkheadClient({ socketPath: d.socket });
    try {
      const s = await c.openSession({ owner: "ts-gap" });
      await c.runCell(s.sessionId, { language: "python", code: "1" });
      // a cell the client does not see (as if its answer were swallowed and replayed)
      hide = true;
      await direct.runCell(s.sessionId, { language: "python", code: "2" });
      await rejects(c.runCell(s.sessionId, { language: "python", code: "3" }), (e) => {
        assert.equal(e.code, "chain_broken");
        assert.match(e.message, /chain is broken/);
      });
      assert.ok(hide);
      await direct.closeSession(s.sessionId);
    } finally {
      c.close();
      direct.close();
      await new Promise((r) => proxy.close(r));
    }
  });

  test("a tier below the floor in an answer is refused", async () => {
    const proxyPath = join(d.dir, "proxy3.sock");
    const proxy = await startProxy(proxyPath, d.socket, (r) => {
      if (r.body.case === "runCell") r.body.value.tier = "container";
      return r;
    });
    const c = new BulkheadClient({ socketPath: proxyPath });
    try {
      const s = await c.openSession({ owner: "ts-tier", minimumIsolation: "kernel" });
      await rejects(c.runCell(s.sessionId, { language: "python", code: "1" }), (e) => {
        assert.equal(e.code, "tier_below_floor");
        assert.equal(e.notDispatched, false);
      });
      await c.closeSession(s.sessionId);
    } finally {
      c.close();
      await new Promise((r) => proxy.close(r));
    }
  });

  test("frames over the limit are refused both ways", async () => {
    const small = new BulkheadClient({ socketPath: d.socket, maxFrameBytes: 4096 });
    const s = await client.openSession({ owner: "ts-frames" });
    try {
      await rejects(
        small.runCell(s.sessionId, { language: "python", code: "#" + "x".repeat(5000) }),
        (e) => {
          assert.equal(e.code, "frame_too_large");
          assert.equal(e.notDispatched, true);
        },
      );
      // an answer above the client's limit: refused unread
      await rejects(
        small.runCell(s.sessionId, { language: "python", code: "print('y' * 10000)" }),
        (e) => {
          assert.equal(e.code, "frame_too_large");
          assert.equal(e.notDispatched, false);
          assert.match(e.message, /answer/);
        },
      );
      // the daemon's own limit, learned from describe, applies to requests
      const info = await client.describe();
      const limit = info.limits.maxFrameBytes;
      assert.ok(limit > 0);
      await rejects(
        client.runCell(s.sessionId, { language: "python", code: "#" + "z".repeat(limit) }),
        (e) => {
          assert.equal(e.code, "frame_too_large");
          assert.equal(e.notDispatched, true);
        },
      );
    } finally {
      small.close();
      await client.closeSession(s.sessionId);
    }
  });

  test("a lost answer says the code may have run", async () => {
    const proxyPath = join(d.dir, "proxy4.sock");
    const proxy = await startProxy(proxyPath, d.socket, (r) => (r.body.case === "runCell" ? null : r));
    const c = new BulkheadClient({ socketPath: proxyPath });
    try {
      const s = await c.openSession({ owner: "ts-lost" });
      await rejects(c.runCell(s.sessionId, { language: "python", code: "ran = True" }), (e) => {
        assert.equal(e.code, "connection_lost");
        assert.equal(e.notDispatched, false);
        assert.match(e.message, /may have run/);
      });
      // it did run: the session says so
      const seen = await client.runCell(s.sessionId, { language: "python", code: "ran" });
      assert.equal(seen.value, "True");
      await client.closeSession(s.sessionId);
    } finally {
      c.close();
      await new Promise((r) => proxy.close(r));
    }
  });
});
