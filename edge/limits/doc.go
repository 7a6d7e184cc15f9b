// Package limits is the limit step of the edge: it admits a call under its
// subject's plan and operation rates, daily cap, stream leases and
// environment quotas (all decided together, so that a call refused by one
// limit consumes none), writes the rate-limit headers, and holds what the
// admission took until the call ends (Admission.Done): the stream lease,
// the environment reservation, which the backend's answer confirms or
// releases (Answered, Ended), and the day's count, given back for a call no
// backend received (Undelivered). Around admission it keeps what depends on
// the same decisions: shadow limits, confirmations Redis refused (retried
// until it takes them), GetUsage, and which limits decide a call for the
// early step (EarlyHold). It kicks the reconciliation of quotas with the
// backend (edge/reconcile) when a forced delete's list could not be
// applied, and runs none itself.
//
// It is not the limiter nor the policy: ratelimit decides rates and quota
// counts environments in Redis, and policy says which plan, operation and
// quota apply (policy.Live, read once per call); limits only applies them
// to a call. It does not decide who may call what (policy) or write a
// refusal's body in a protocol (apierror).
package limits
