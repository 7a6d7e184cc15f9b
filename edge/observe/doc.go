// Package observe is what the edge tells its operators: Prometheus metrics
// (Metrics, the Redis client's hook, the limiter's breaker), OpenTelemetry
// spans (Tracing) and the buffered writer under the access log
// (LogWriter). Labels and span attributes are bounded: services and methods
// of the API, protocols, codes, plans; never a token or a subject.
//
// It is not a step of the chain and decides nothing. The steps do not
// import it: each declares the small observer interface it needs (for
// example limits.Observer), and Metrics implements them.
package observe
