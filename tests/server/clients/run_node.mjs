// The real-client scenario with the JavaScript SDK v3:
//   node run_node.mjs NODE_DIR PACKAGE ENDPOINT SCENARIO.json
// NODE_DIR holds node_modules with PACKAGE (an alias of @aws-sdk/client-sqs at a pinned version).
// Prints one JSON line per step: {"result": ...} or {"error": {...}}; checking is the Python test's job.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const [nodeDir, packageName, endpoint, scenarioPath] = process.argv.slice(2);
const require = createRequire(join(nodeDir, "package.json"));
const sdk = require(packageName);
// Query-era versions ship the query protocol's serializers; later ones speak AWS JSON 1.0.
const packageDir = dirname(require.resolve(`${packageName}/package.json`));
const speaksQuery = existsSync(join(packageDir, "dist-cjs", "protocols", "Aws_query.js"));
const speaksJson = readFileSync(join(packageDir, "dist-cjs", "index.js"), "utf8").includes("AwsJson1_0");
process.stdout.write(JSON.stringify({ protocol: speaksQuery ? "query" : speaksJson ? "json" : "unknown" }) + "\n");
const scenario = JSON.parse(readFileSync(scenarioPath, "utf8"));
const client = new sdk.SQSClient({
  endpoint,
  region: "us-east-1",
  credentials: { accessKeyId: "test", secretAccessKey: "test" },
  maxAttempts: 1,
});
const saved = { endpoint };

function substitute(value) {
  if (typeof value === "string") return value.replace(/\$\{(\w+)\}/g, (_, name) => saved[name]);
  if (Array.isArray(value)) return value.map(substitute);
  if (value && typeof value === "object") {
    if ("$base64" in value) return Uint8Array.from(Buffer.from(value.$base64, "base64"));
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
  }
  return value;
}

function normalize(value) {
  if (value instanceof Uint8Array) return Buffer.from(value).toString("base64");
  if (Array.isArray(value)) return value.map(normalize);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k, v]) => k !== "$metadata" && v !== undefined)
        .map(([k, v]) => [k, normalize(v)]),
    );
  }
  return value;
}

function pick(value, path) {
  return path.split(".").reduce((node, part) => (node == null ? undefined : node[part]), value);
}

for (const step of scenario.steps) {
  let outcome;
  try {
    const result = normalize(await client.send(new sdk[`${step.call}Command`](substitute(step.params ?? {}))));
    for (const [name, path] of Object.entries(step.save ?? {})) saved[name] = pick(result, path);
    outcome = { result };
  } catch (error) {
    outcome = {
      error: {
        // A query-compatible JSON error carries its query code in Code.  Query-era versions keep the
        // <Error> element of the answer as error.Error (their modeled errors' message is "UnknownError").
        code: error.Code ?? error.Error?.Code ?? error.name,
        message: error.Error?.Message ?? error.message,
        status: error.$metadata?.httpStatusCode,
      },
    };
  }
  process.stdout.write(JSON.stringify(outcome) + "\n");
}
