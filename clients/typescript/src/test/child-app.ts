// A second app process: its own BulkheadClient, tool and Agent; runs one
// turn of a user's thread and prints the tool's output as JSON.
// argv: socket resourceId threadId code
import { Agent } from "@mastra/core/agent";
import { BulkheadClient } from "../index.js";
import { bulkheadExecuteCode } from "../mastra.js";
import { scriptedModel } from "./scripted-model.js";

const [socket, resource, thread, code] = process.argv.slice(2);
const client = new BulkheadClient({ socketPath: socket });
const { executeCode } = bulkheadExecuteCode({ client });
const m = scriptedModel();
const agent = new Agent({
  id: "child",
  name: "child",
  instructions: "run code",
  model: m.model as never,
  tools: { executeCode },
});
m.next({ code });
const r = await agent.generate("continue", { memory: { thread, resource } });
const out = (r.toolResults[0] as { payload: { result: unknown } }).payload.result;
process.stdout.write(JSON.stringify({ out, seen: m.seen }));
client.close();
