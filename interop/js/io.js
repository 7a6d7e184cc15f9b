// What every Node script here shares with the Go test: its input is one JSON
// object on standard input, its report one JSON object on standard output.
export async function readInput() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// report writes the report and ends the process: clients keep connections
// (HTTP/2 sessions, channels) open that would otherwise keep it alive.
export function report(out) {
  process.stdout.write(JSON.stringify(out) + "\n", () => process.exit(0));
}
