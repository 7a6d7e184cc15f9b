// Drives headless Chromium through the DevTools protocol: loads a page,
// waits for the promise it leaves in window.interopResult, and reports it
// with what the browser logged (a refused cross-origin call is only
// explained there).
//
// Input: {chromium (the binary), url, timeoutMs}. Output: {page, log}.
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import CDP from "chrome-remote-interface";
import { readInput, report } from "../js/io.js";

const input = await readInput();
const profile = await mkdtemp(join(tmpdir(), "interop-chromium-"));
// The flags keep Chromium from calling home (this machine has no network
// beyond loopback) and let it run as root.
const chromium = spawn(
  input.chromium,
  [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    `--user-data-dir=${profile}`,
    "--remote-debugging-port=0",
    "about:blank",
  ],
  { stdio: ["ignore", "ignore", "pipe"] },
);

// exited: whether Chromium has ended. A process ended by a signal (a crash,
// or our SIGKILL) keeps exitCode null and has signalCode set instead.
const exited = () => chromium.exitCode !== null || chromium.signalCode !== null;

async function stop() {
  chromium.kill("SIGKILL");
  // Waiting on "exit" for a process that has already ended would wait for
  // ever: Node would then find nothing left to do and exit 0 with no
  // report.
  await new Promise((r) => (exited() ? r() : chromium.once("exit", r)));
  // Chromium's child processes (renderer, GPU, crashpad) outlive the
  // browser's SIGKILL by a moment and may still write into the profile:
  // fs.rm retries ENOTEMPTY and EBUSY (maxRetries, linear backoff) rather
  // than failing the run (seen in CI: ENOTEMPTY on Default/).
  await rm(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
}

function fail(message) {
  stop().finally(() => {
    process.stderr.write(`drive: ${message}\n`);
    process.exit(1);
  });
}

const timer = setTimeout(() => fail(`no report in ${input.timeoutMs} ms`), input.timeoutMs);

// Chromium names its DevTools port on stderr.
const port = await new Promise((resolve, reject) => {
  let seen = "";
  chromium.stderr.on("data", (b) => {
    seen += b;
    const m = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(seen);
    if (m) resolve(Number(m[1]));
  });
  chromium.once("exit", (code) => reject(new Error(`chromium exited (${code}): ${seen}`)));
}).catch((e) => fail(e.message));

const log = [];
try {
  const cdp = await CDP({ port });
  const { Page, Runtime, Log } = cdp;
  Log.entryAdded(({ entry }) => log.push(`${entry.level}: ${entry.text}${entry.url ? ` (${entry.url})` : ""}`));
  Runtime.consoleAPICalled(({ type, args }) => log.push(`console.${type}: ${args.map((a) => a.value ?? a.description).join(" ")}`));
  Runtime.exceptionThrown(({ exceptionDetails }) =>
    log.push(`exception: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`),
  );
  await Promise.all([Page.enable(), Runtime.enable(), Log.enable()]);
  const loaded = Page.loadEventFired();
  const nav = await Page.navigate({ url: input.url });
  if (nav.errorText) throw new Error(`navigate ${input.url}: ${nav.errorText}`);
  await loaded;
  const res = await Runtime.evaluate({ expression: "window.interopResult", awaitPromise: true, returnByValue: true });
  if (res.exceptionDetails) throw new Error(`page: ${res.exceptionDetails.exception?.description ?? res.exceptionDetails.text}`);
  await cdp.close();
  clearTimeout(timer);
  await stop();
  report({ page: res.result.value, log });
} catch (e) {
  fail(`${e.stack ?? e}\n${log.join("\n")}`);
}
