// The page that Chromium loads from another origin than the edge's. It runs
// the Connect-ES checks with connect-web's Connect and gRPC-Web transports,
// and a stream with Google's grpc-web client in text mode, and leaves its
// report in window.interopResult (a promise) for the driver to read.
//
// Input: /input.json from the page's own origin: {edge, checks: {connect,
// grpc-web: {pro, free, projectId, tag}}, text: {pro, projectId, tag}}; the
// API's descriptors at /api.binpb.
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { GrpcWebClientBase, MethodDescriptor, MethodType, StatusCode } from "grpc-web";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { apiOf, registryOf, runChecks } from "../js/connect_checks.js";

const codeNames = Object.fromEntries(Object.entries(StatusCode).map(([k, v]) => [v, k]));

function rpcError(e) {
  return { code: codeNames[e.code] ?? String(e.code), message: e.message };
}

// grpcWebText creates an environment and watches it until it is deleted,
// with grpc-web in text mode (application/grpc-web-text).
async function grpcWebText(registry, edge, in_) {
  const client = new GrpcWebClientBase({ format: "text" });
  const method = (service, name, kind) => {
    const m = registry.getService(service).methods.find((m) => m.name === name);
    return new MethodDescriptor(
      `/${service}/${name}`,
      kind,
      Object,
      Object,
      (req) => toBinary(m.input, create(m.input, req)),
      (bytes) => fromBinary(m.output, bytes),
    );
  };
  const env = "svc.v1.EnvironmentService";
  const createEnv = method(env, "CreateEnvironment", MethodType.UNARY);
  const deleteEnv = method(env, "DeleteEnvironment", MethodType.UNARY);
  const watchEnv = method(env, "WatchEnvironment", MethodType.SERVER_STREAMING);
  const md = { authorization: `Bearer ${in_.pro}` };
  const out = {};
  let id;
  try {
    const res = await client.unaryCall(
      `${edge}/${env}/CreateEnvironment`,
      { name: `text-${in_.tag}`, blueprintId: "redis-7", projectId: in_.projectId },
      md,
      createEnv,
    );
    id = res.environment.id;
    out.unary = { id };
  } catch (e) {
    out.unary = { error: rpcError(e) };
    out.watch = { statuses: [], error: { code: "NOT_RUN", message: "no environment to watch: CreateEnvironment failed" } };
    return out;
  }
  out.watch = await new Promise((resolve) => {
    const statuses = [];
    let status = null;
    const stream = client.serverStreaming(`${edge}/${env}/WatchEnvironment`, { environmentId: id }, md, watchEnv);
    const timer = setTimeout(() => {
      stream.cancel();
      resolve({ statuses, error: { code: "TIMEOUT", message: "no end of stream in 30s" } });
    }, 30000);
    stream.on("data", (m) => {
      statuses.push(m.status);
      if (statuses.length === 1) {
        client
          .unaryCall(`${edge}/${env}/DeleteEnvironment`, { environmentId: id }, md, deleteEnv)
          .catch((e) => resolve({ statuses, error: rpcError(e) }));
      }
    });
    stream.on("status", (s) => (status = codeNames[s.code]));
    stream.on("error", (e) => {
      clearTimeout(timer);
      resolve({ statuses, error: rpcError(e) });
    });
    stream.on("end", () => {
      clearTimeout(timer);
      resolve({ statuses, status });
    });
  });
  return out;
}

async function main() {
  const input = await (await fetch("/input.json")).json();
  const registry = registryOf(new Uint8Array(await (await fetch("/api.binpb")).arrayBuffer()));
  const transports = {
    connect: createConnectTransport({ baseUrl: input.edge }),
    "grpc-web": createGrpcWebTransport({ baseUrl: input.edge }),
  };
  const out = { origin: location.origin };
  await Promise.all([
    ...Object.entries(input.checks).map(async ([name, in_]) => {
      out[name] = await runChecks(apiOf(registry, transports[name]), in_);
    }),
    grpcWebText(registry, input.edge, input.text).then((r) => (out["grpc-web-text"] = r)),
  ]);
  return out;
}

window.interopResult = main().catch((e) => ({ fatal: String((e && e.stack) || e) }));
