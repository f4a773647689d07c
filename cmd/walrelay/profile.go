//go:build walrelay_profile

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfilePathEnv names the file of a CPU profile of the whole process,
// written when walrelay exits normally (after SIGTERM too). Only the
// profiling build (tag walrelay_profile, for the benchmarks) reads it.
const cpuProfilePathEnv = "WALRELAY_CPUPROFILE"

func startProfile() (stop func()) {
	path := os.Getenv(cpuProfilePathEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "walrelay: %s: %v\n", cpuProfilePathEnv, err)
		os.Exit(2)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
