// @grpc/grpc-js against the edge, with gRPC's standard retry policy.
//
// Input: {edge, dead (host:port: an edge whose backend is down),
// descriptors (a file path), pro, free, pushback (tokens)}.
// Output: {unary, retry, rate, pushback}.
import { readFile } from "node:fs/promises";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { registryOf } from "./connect_checks.js";
import { reportedMetadata, statusDetails } from "./grpc_details.js";
import { readInput, report } from "./io.js";

const input = await readInput();
const registry = registryOf(await readFile(input.descriptors));
const listReq = registry.getMessage("svc.v1.ListOrganizationsRequest");
const listRes = registry.getMessage("svc.v1.ListOrganizationsResponse");
const list = "/svc.v1.OrganizationService/ListOrganizations";

// client makes a channel whose service config retries the given codes.
function client(target, retryableStatusCodes, maxAttempts) {
  const options = {};
  if (retryableStatusCodes) {
    options["grpc.service_config"] = JSON.stringify({
      methodConfig: [
        {
          name: [{ service: "svc.v1.OrganizationService" }],
          retryPolicy: {
            maxAttempts,
            initialBackoff: "0.01s",
            maxBackoff: "0.05s",
            backoffMultiplier: 2,
            retryableStatusCodes,
          },
        },
      ],
    });
  }
  return new grpc.Client(target, grpc.credentials.createInsecure(), options);
}

function pick(md) {
  const out = {};
  for (const name of reportedMetadata) {
    const v = md.get(name);
    if (v.length) out[name] = String(v[0]);
  }
  return out;
}

// listOrganizations calls once and reports the status, the metadata of the
// answer (headers, or the error's trailers) and the error's details.
function listOrganizations(c, token) {
  const md = new grpc.Metadata();
  md.set("authorization", `Bearer ${token}`);
  return new Promise((resolve) => {
    let headers = new grpc.Metadata();
    const call = c.makeUnaryRequest(
      list,
      (m) => Buffer.from(toBinary(listReq, m)),
      (b) => fromBinary(listRes, b),
      create(listReq, {}),
      md,
      { deadline: Date.now() + 30000 },
      (err, res) => {
        if (err) {
          const bin = err.metadata.get("grpc-status-details-bin");
          resolve({
            code: grpc.status[err.code],
            message: err.details,
            metadata: pick(err.metadata),
            ...statusDetails(registry, bin.length ? bin[0] : null),
          });
        } else {
          resolve({ code: "OK", organizations: res.organizations.length, metadata: pick(headers) });
        }
      },
    );
    call.on("metadata", (m) => (headers = m));
  });
}

// untilRefused calls until the edge refuses, and reports the refusal.
async function untilRefused(c, token) {
  for (let calls = 1; calls <= 50; calls++) {
    const r = await listOrganizations(c, token);
    if (r.code !== "OK") return { calls, ...r };
  }
  return { calls: 50, code: "OK" };
}

const plain = client(input.edge);
const out = {};
out.unary = await listOrganizations(plain, input.pro);
out.retry = await listOrganizations(client(input.dead, ["UNAVAILABLE"], 4), input.pro);
out.rate = await untilRefused(plain, input.free);
// A policy that retries RESOURCE_EXHAUSTED waits for the pushback the
// refusal names, and its retry is then admitted.
const refused = await untilRefused(plain, input.pushback);
const start = Date.now();
const retried = await listOrganizations(client(input.edge, ["RESOURCE_EXHAUSTED"], 2), input.pushback);
out.pushback = { refused, retried, elapsedMs: Date.now() - start };
report(out);
