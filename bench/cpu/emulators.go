package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyio/rekey/internal/store/emulator"
)

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// 100 on Linux whatever the kernel's own tick).
const clockTicks = 100

// emulatorProc is an emulator this benchmark started (emulator.Launch: on a
// free loopback port, leading a process group of its own), so that its CPU
// time can be read from /proc whatever processes it starts (the Firestore
// emulator is a script that starts a JVM).
type emulatorProc struct {
	emulator.Launched
}

// startEmulators starts the Spanner emulator and the Firestore emulator
// in Datastore mode, each on a free port with its log in dir, and points
// this process (and so the children it starts) at them.
func startEmulators(ctx context.Context, dir string) ([]*emulatorProc, error) {
	var started []*emulatorProc
	for _, k := range emulator.Kinds {
		l, err := emulator.Launch(ctx, k, 0, filepath.Join(dir, string(k)+"-emulator.log"))
		if err != nil {
			stopEmulators(started)
			return nil, err
		}
		started = append(started, &emulatorProc{l})
		os.Setenv(k.HostEnv(), l.Host)
	}
	return started, nil
}

// stopEmulators stops the emulators, saying on stderr what failed.
func stopEmulators(es []*emulatorProc) {
	for _, e := range es {
		if _, err := e.Stop(5 * time.Second); err != nil {
			fmt.Fprintln(os.Stderr, "cpu:", err)
		}
	}
}

// cpu is the user and system CPU time used so far by the live processes
// of the emulator's process group.
func (e *emulatorProc) cpu() time.Duration {
	pgid := strconv.Itoa(e.PID)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, d := range entries {
		if d.Name()[0] < '0' || d.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command's name, "(name)", which may hold
		// spaces: state ppid pgrp session tty tpgid flags minflt cminflt
		// majflt cmajflt utime stime ...
		s := string(data)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 || f[2] != pgid {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// emulatorCPU is the CPU time used so far by all the emulators.
func emulatorCPU(es []*emulatorProc) time.Duration {
	var t time.Duration
	for _, e := range es {
		t += e.cpu()
	}
	return t
}
