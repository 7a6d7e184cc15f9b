// Package limits is the limit step of the edge: it admits a call under its
// subject's plan and operation rates, daily cap, stream leases and
// environment quotas (all decided together, so that a call refused by one
// limit consumes none), writes the rate-limit headers, and confirms or
// releases a quota when the backend's answer says what the call did.
//
// Around admission it holds what depends on the same limits: the live
// policy a reload swaps (Live), GetUsage, the reconciliation of quotas with
// the backend's environments, shadow limits, and which limits decide a call
// for the early step.
//
// It is not the limiter: ratelimit decides rates and quota counts
// environments in Redis; limits only applies them to a call. It does not
// decide who may call what (policy) or write a refusal's body in a
// protocol (apierror).
package limits
