// Package health is what `walrelay run` answers over HTTP: /metrics for
// Prometheus, /healthz (the process answers) and /readyz (the process does
// its job), and the rule that decides readiness.
//
// Readiness is a pure rule over what the process's parts report
// (Readiness), so that it is tested without a database or a broker; Serve
// is the thin server around it.
//
// Internal: walrelay's own, for cmd/walrelay.
package health
