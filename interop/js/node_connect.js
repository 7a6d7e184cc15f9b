// connect-node against the edge, in each of its transports: the Connect
// protocol and gRPC-Web over HTTP/1.1, gRPC over HTTP/2 (h2c).
//
// Input: {edge, descriptors (a file path), checks: {transport: {pro, free,
// projectId, tag}}}. Output: {transport: report of runChecks}.
import { readFile } from "node:fs/promises";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { apiOf, registryOf, runChecks } from "./connect_checks.js";
import { readInput, report } from "./io.js";

const input = await readInput();
const registry = registryOf(await readFile(input.descriptors));
const transports = {
  connect: () => createConnectTransport({ baseUrl: input.edge, httpVersion: "1.1" }),
  grpc: () => createGrpcTransport({ baseUrl: input.edge, httpVersion: "2" }),
  "grpc-web": () => createGrpcWebTransport({ baseUrl: input.edge, httpVersion: "1.1" }),
};
const out = {};
await Promise.all(
  Object.entries(input.checks).map(async ([name, in_]) => {
    out[name] = await runChecks(apiOf(registry, transports[name]()), in_);
  }),
);
report(out);
