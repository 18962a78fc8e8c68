// Generates the wire code from the repository's one control protocol
// (proto/control.proto) into src/gen/, with protoc and @bufbuild/protoc-gen-es.
// Run by `npm run build` (and so by `npm test`): the generated code is never
// committed, so it cannot drift from the .proto the daemon is built from.
import { execFileSync } from "node:child_process";
import { mkdirSync, existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const protoDir = resolve(pkg, "../../proto");
const out = join(pkg, "src/gen");
const plugin = join(pkg, "node_modules/.bin/protoc-gen-es");

if (!existsSync(join(protoDir, "control.proto"))) {
  console.error(`gen: ${protoDir}/control.proto is missing: build from the bulkhead repository`);
  process.exit(1);
}
if (!existsSync(plugin)) {
  console.error("gen: protoc-gen-es is not installed: run `npm ci` first");
  process.exit(1);
}
mkdirSync(out, { recursive: true });
try {
  execFileSync(
    "protoc",
    [
      `--plugin=protoc-gen-es=${plugin}`,
      `--es_out=${out}`,
      "--es_opt=target=ts,import_extension=js",
      `--proto_path=${protoDir}`,
      "control.proto",
    ],
    { stdio: "inherit" },
  );
} catch (e) {
  console.error(
    "gen: protoc failed (is Debian's protobuf-compiler installed? `make deps` installs it): " +
      e.message,
  );
  process.exit(1);
}
