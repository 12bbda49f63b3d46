// `npm test`: the node tests (test/*.test.mjs, and only those: the other modules here are
// their helpers) against a live memoryui server. With MEMORYUI_URL and MEMORYUI_API_KEY set,
// that server; without them, a throw-away one this script starts from the repository
// (tests/node_server.py, with the repository's .venv: `make .venv/.test-installed` makes it),
// which also gives the admin key and the Claude Code session files the tests use.
// Arguments are passed to `node --test` (e.g. --test-name-pattern=…).
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createInterface } from "node:readline";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "..", "..", "..");
const files = readdirSync(here).filter((name) => name.endsWith(".test.mjs")).sort().map((name) => join(here, name));

async function startServer() {
  const python = join(root, ".venv", "bin", "python");
  if (!existsSync(python)) {
    throw new Error(`no server to test: set MEMORYUI_URL and MEMORYUI_API_KEY, or make the repository's virtualenv `
      + `(make .venv/.test-installed in ${root}) so that npm test can start one`);
  }
  const server = spawn(python, [join(root, "tests", "node_server.py")], { cwd: root,
    stdio: ["pipe", "pipe", "inherit"] });
  const first = await new Promise((done, fail) => {
    const lines = createInterface({ input: server.stdout });
    lines.once("line", done);
    server.once("exit", (code) => fail(new Error(`tests/node_server.py exited (${code}) before serving`)));
  });
  return { server, env: JSON.parse(first) };
}

let server = null;
let env = {};
if (!process.env.MEMORYUI_URL || !process.env.MEMORYUI_API_KEY) {
  ({ server, env } = await startServer());
  console.log(`# npm test: a throw-away memoryui at ${env.MEMORYUI_URL}`);
}
const tests = spawn(process.execPath, ["--test", "--test-concurrency=4", ...process.argv.slice(2), ...files], {
  cwd: resolve(here, ".."), stdio: "inherit", env: { ...process.env, ...env } });
const code = await new Promise((done) => tests.once("exit", (status, signal) => done(status ?? (signal ? 1 : 0))));
if (server) {
  server.stdin.end();
  await new Promise((done) => server.once("exit", done));
}
process.exit(code);
