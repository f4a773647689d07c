//go:build !walrelay_profile

package main

// startProfile profiles nothing: only the build with tag walrelay_profile
// (profile.go, for the benchmarks) writes a CPU profile.
func startProfile() (stop func()) { return func() {} }
