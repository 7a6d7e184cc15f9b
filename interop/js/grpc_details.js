// Reading a gRPC error the way a gRPC client's user does: the status code,
// the trailing metadata, and google.rpc.Status from grpc-status-details-bin
// unpacked with the API's descriptors.
import { fromBinary } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { reportedHeaders } from "./connect_checks.js";

// Metadata the checks report: gRPC's pacing and retries, and the headers
// every protocol's clients read.
export const reportedMetadata = ["grpc-retry-pushback-ms", "grpc-previous-rpc-attempts", ...reportedHeaders];

// statusDetails decodes grpc-status-details-bin (bytes) into the ErrorInfo
// and RetryInfo details it holds.
export function statusDetails(registry, bytes) {
  const out = { errorInfo: [], retryDelaySeconds: [] };
  if (!bytes) return out;
  const status = fromBinary(registry.getMessage("google.rpc.Status"), bytes);
  for (const any of status.details) {
    const m = anyUnpack(any, registry);
    if (!m) continue;
    if (m.$typeName === "google.rpc.ErrorInfo") {
      out.errorInfo.push({ reason: m.reason, domain: m.domain, metadata: m.metadata });
    } else if (m.$typeName === "google.rpc.RetryInfo") {
      const d = m.retryDelay;
      out.retryDelaySeconds.push(d ? Number(d.seconds) + d.nanos / 1e9 : null);
    }
  }
  return out;
}
