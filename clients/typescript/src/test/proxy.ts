// A frame-level man in the middle for the tests: listens on a second socket,
// forwards every frame to the daemon and lets the test alter answers in
// transit (decoded and re-encoded with the generated code).
import { createServer, connect, type Server, type Socket } from "node:net";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Response, ResponseSchema } from "../gen/control_pb.js";

/** An altered answer, raw bytes to send instead, or null to cut the connection unanswered. */
export type Alter = (r: Response) => Response | Uint8Array | null;

function frames(sock: Socket, onFrame: (f: Buffer) => void) {
  let buf = Buffer.alloc(0);
  sock.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUInt32BE(0)) {
      const len = buf.readUInt32BE(0);
      onFrame(buf.subarray(4, 4 + len));
      buf = buf.subarray(4 + len);
    }
  });
}

function frame(b: Uint8Array): Buffer {
  const h = Buffer.allocUnsafe(4);
  h.writeUInt32BE(b.length, 0);
  return Buffer.concat([h, b]);
}

export async function startProxy(
  listenPath: string,
  daemonPath: string,
  alter: Alter,
): Promise<Server> {
  const server = createServer((client) => {
    const up = connect(daemonPath);
    frames(client, (f) => up.write(frame(f)));
    frames(up, (f) => {
      const out = alter(fromBinary(ResponseSchema, f));
      if (out === null) {
        client.destroy();
        return;
      }
      client.write(out instanceof Uint8Array ? out : frame(toBinary(ResponseSchema, out)));
    });
    client.on("close", () => up.destroy());
    up.on("close", () => client.destroy());
    client.on("error", () => up.destroy());
    up.on("error", () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(listenPath, r));
  return server;
}
