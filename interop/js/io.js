// What every Node script here shares with the Go test: its input is one JSON
// object on standard input, its report one JSON object on standard output.
export async function readInput() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// A script whose work is left waiting on something that never comes (an
// event of a process already gone) would otherwise end with exit status 0
// and no report, which the Go test can only call "unexpected end of JSON
// input". report ends the process itself, so this runs only then.
process.on("beforeExit", () => {
  process.stderr.write("ended with nothing left to wait for, and no report\n");
  process.exit(1);
});

// report writes the report and ends the process: clients keep connections
// (HTTP/2 sessions, channels) open that would otherwise keep it alive.
export function report(out) {
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
}
