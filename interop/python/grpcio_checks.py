"""grpcio (Debian's python3-grpcio) against the edge, with gRPC's standard
retry policy.

Input, one JSON object on standard input: {edge, dead (host:port: an edge
whose backend is down), descriptors (a FileDescriptorSet file), pro, free
(tokens)}. Output, one JSON object on standard output: {unary, retry, rate},
each what grpcio reported: the status code's name, the trailing metadata,
and the ErrorInfo and RetryInfo of grpc-status-details-bin.
"""

import json
import sys

import grpc
from google.protobuf import descriptor_pb2, message_factory

LIST = "/svc.v1.OrganizationService/ListOrganizations"
REPORTED = (
    "grpc-retry-pushback-ms",
    "retry-after",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
    "ratelimit",
    "ratelimit-policy",
)


def service_config(codes, attempts):
    return json.dumps({
        "methodConfig": [{
            "name": [{"service": "svc.v1.OrganizationService"}],
            "retryPolicy": {
                "maxAttempts": attempts,
                "initialBackoff": "0.01s",
                "maxBackoff": "0.05s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": codes,
            },
        }],
    })


class API:
    def __init__(self, path):
        with open(path, "rb") as f:
            files = descriptor_pb2.FileDescriptorSet.FromString(f.read()).file
        self.types = message_factory.GetMessages(files)

    def details(self, trailers):
        out = {"errorInfo": [], "retryDelaySeconds": []}
        raw = dict(trailers or ()).get("grpc-status-details-bin")
        if raw is None:
            return out
        status = self.types["google.rpc.Status"].FromString(raw)
        for any_ in status.details:
            name = any_.type_url.rsplit("/", 1)[-1]
            if name == "google.rpc.ErrorInfo":
                info = self.types[name].FromString(any_.value)
                out["errorInfo"].append({"reason": info.reason, "domain": info.domain,
                                         "metadata": dict(info.metadata)})
            elif name == "google.rpc.RetryInfo":
                d = self.types[name].FromString(any_.value).retry_delay
                out["retryDelaySeconds"].append(d.seconds + d.nanos / 1e9)
        return out

    def list_organizations(self, channel, token):
        call = channel.unary_unary(
            LIST,
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=self.types["svc.v1.ListOrganizationsResponse"].FromString,
        )
        req = self.types["svc.v1.ListOrganizationsRequest"]()
        try:
            res = call(req, metadata=(("authorization", "Bearer " + token),), timeout=30)
        except grpc.RpcError as e:
            trailers = e.trailing_metadata() or ()
            return {
                "code": e.code().name,
                "message": e.details(),
                "metadata": {k: v for k, v in trailers if k in REPORTED},
                **self.details(trailers),
            }
        return {"code": "OK", "organizations": len(res.organizations)}


def main():
    cfg = json.load(sys.stdin)
    api = API(cfg["descriptors"])
    out = {}
    with grpc.insecure_channel(cfg["edge"]) as ch:
        out["unary"] = api.list_organizations(ch, cfg["pro"])
        for calls in range(1, 51):
            r = api.list_organizations(ch, cfg["free"])
            if r["code"] != "OK":
                out["rate"] = {"calls": calls, **r}
                break
    options = [("grpc.enable_retries", 1),
               ("grpc.service_config", service_config(["UNAVAILABLE"], 4))]
    with grpc.insecure_channel(cfg["dead"], options=options) as ch:
        out["retry"] = api.list_organizations(ch, cfg["pro"])
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
