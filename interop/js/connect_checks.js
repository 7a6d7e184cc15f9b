// The checks that a Connect-ES client (connect-web in a browser,
// connect-node in Node) runs against the edge, for one transport. Each check
// reports what the client's own API returned: messages, codes, error details
// decoded with findDetails, response headers. The Go test judges them.
import { createClient, ConnectError, Code } from "@connectrpc/connect";
import { createFileRegistry, fromBinary } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

// Headers the checks report: what a caller reads to pace itself or to know
// that an answer was replayed.
export const reportedHeaders = [
  "retry-after",
  "x-ratelimit-limit",
  "x-ratelimit-remaining",
  "x-ratelimit-reset",
  "ratelimit",
  "ratelimit-policy",
  "idempotent-replayed",
];

// registryOf reads the API's descriptors (a FileDescriptorSet, as the Go
// test writes it from the compiled API).
export function registryOf(bytes) {
  return createFileRegistry(fromBinary(FileDescriptorSetSchema, bytes));
}

// apiOf returns clients of every service, and the error detail types.
export function apiOf(registry, transport) {
  const service = (name) => {
    const s = registry.getService(name);
    if (!s) throw new Error(`no service ${name} in the descriptors`);
    return createClient(s, transport);
  };
  return {
    org: service("svc.v1.OrganizationService"),
    env: service("svc.v1.EnvironmentService"),
    errorInfo: registry.getMessage("google.rpc.ErrorInfo"),
    retryInfo: registry.getMessage("google.rpc.RetryInfo"),
  };
}

function pick(headers) {
  const out = {};
  for (const name of reportedHeaders) {
    const v = headers.get(name);
    if (v !== null) out[name] = v;
  }
  return out;
}

function seconds(d) {
  return d ? Number(d.seconds) + d.nanos / 1e9 : null;
}

// describeError is what the client tells of a failed call.
export function describeError(api, e) {
  const ce = ConnectError.from(e);
  return {
    code: Code[ce.code],
    message: ce.rawMessage,
    cause: ce.cause ? String(ce.cause) : undefined,
    headers: pick(ce.metadata),
    errorInfo: ce.findDetails(api.errorInfo).map((d) => ({
      reason: d.reason,
      domain: d.domain,
      metadata: d.metadata,
    })),
    retryDelaySeconds: ce.findDetails(api.retryInfo).map((d) => seconds(d.retryDelay)),
  };
}

function auth(token, more = {}) {
  return { Authorization: `Bearer ${token}`, ...more };
}

// attempt runs one check, turning an exception into its report.
async function attempt(api, fn) {
  try {
    return await fn();
  } catch (e) {
    return { error: describeError(api, e) };
  }
}

// runChecks runs every check for one transport. in: {pro, free: tokens;
// projectId: a project the pro subject owns; tag: unique per transport}.
export async function runChecks(api, in_) {
  const out = {};
  const pro = in_.pro;

  out.unary = await attempt(api, async () => {
    const org = await api.org.createOrganization(
      { name: `unary-${in_.tag}`, billingEmail: "a@b.example" },
      { headers: auth(pro) },
    );
    const got = await api.org.getOrganization({ organizationId: org.id }, { headers: auth(pro) });
    return { id: org.id, name: got.name };
  });

  out.replay = await attempt(api, async () => {
    const key = `replay-${in_.tag}-${Date.now()}`;
    const calls = [];
    for (let i = 0; i < 2; i++) {
      let headers = new Headers();
      const org = await api.org.createOrganization(
        { name: `replay-${in_.tag}`, billingEmail: "a@b.example" },
        { headers: auth(pro, { "Idempotency-Key": key }), onHeader: (h) => (headers = h) },
      );
      calls.push({ id: org.id, headers: pick(headers) });
    }
    return { calls };
  });

  out.watch = await attempt(api, async () => {
    const created = await api.env.createEnvironment(
      { name: `watch-${in_.tag}`, blueprintId: "redis-7", projectId: in_.projectId },
      { headers: auth(pro) },
    );
    const id = created.environment.id;
    const statuses = [];
    const ctl = new AbortController();
    const stream = api.env.watchEnvironment(
      { environmentId: id },
      { headers: auth(pro), signal: ctl.signal, timeoutMs: 30000 },
    );
    for await (const m of stream) {
      statuses.push(m.status);
      // The first message is the current state; deleting the environment is
      // the change the stream must deliver, and its last message.
      if (statuses.length === 1) {
        await api.env.deleteEnvironment({ environmentId: id }, { headers: auth(pro) });
      }
    }
    return { statuses };
  });

  out.rate = await (async () => {
    // The free plan's burst is small in the test's configuration: call until
    // refused, and report the refusal.
    for (let calls = 1; calls <= 50; calls++) {
      try {
        await api.org.listOrganizations({}, { headers: auth(in_.free) });
      } catch (e) {
        return { calls, error: describeError(api, e) };
      }
    }
    return { calls: 50 };
  })();

  return out;
}
