package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeEnv makes the test binary, run by a script as SPANNER_EMULATOR_BIN,
// act as an emulator (TestFakeEmulatorProcess).
const fakeEnv = "REKEY_FAKE_EMULATOR"

// TestFakeEmulatorProcess is not a test: run by the script fakeSpanner
// writes, it listens on --host_port=HOST:PORT like the Spanner emulator,
// or exits at once with a message when the mode says so.
func TestFakeEmulatorProcess(t *testing.T) {
	mode := os.Getenv(fakeEnv)
	if mode == "" {
		t.Skip("helper process")
	}
	if mode == "exit" {
		fmt.Println("boom: cannot start")
		os.Exit(3)
	}
	var host string
	for _, a := range os.Args {
		if h, ok := strings.CutPrefix(a, "--host_port="); ok {
			host = h
		}
	}
	l, err := net.Listen("tcp", host)
	if err != nil {
		fmt.Println(err)
		os.Exit(4)
	}
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(5)
		}
		c.Close()
	}
}

// fakeSpanner makes SPANNER_EMULATOR_BIN a script that runs the test
// binary as an emulator in mode ("listen" or "exit"), and returns it.
func fakeSpanner(t *testing.T, mode string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fake-spanner-emulator")
	script := fmt.Sprintf("#!/bin/sh\n%s=%s exec %q -test.run='^TestFakeEmulatorProcess$' -- \"$@\"\n", fakeEnv, mode, os.Args[0])
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPANNER_EMULATOR_BIN", bin)
	return bin
}

func TestBinaryNotInstalled(t *testing.T) {
	t.Setenv("SPANNER_EMULATOR_BIN", filepath.Join(t.TempDir(), "missing"))
	_, err := Binary(Spanner)
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Binary with a missing file: %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"Spanner emulator", "missing", "gcloud components install cloud-spanner-emulator", "SPANNER_EMULATOR_BIN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	t.Setenv("FIRESTORE_EMULATOR_BIN", t.TempDir()) // a directory
	if _, err := Binary(Datastore); !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "cloud-firestore-emulator") {
		t.Errorf("Binary with a directory: %v", err)
	}
	if _, err := Binary("mysql"); err == nil || errors.Is(err, ErrNotInstalled) {
		t.Errorf("Binary of an unknown kind: %v", err)
	}
}

func TestLaunchAnswersAndStops(t *testing.T) {
	bin := fakeSpanner(t, "listen")
	logPath := filepath.Join(t.TempDir(), "spanner.log")
	l, err := Launch(t.Context(), Spanner, 0, logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-l.PID, syscall.SIGKILL) }) // should the test fail before Stop
	if l.Kind != Spanner || l.Bin != bin || l.Log != logPath || l.Port() == 0 || l.Host != fmt.Sprintf("127.0.0.1:%d", l.Port()) || l.StartTicks == 0 {
		t.Errorf("Launched = %+v", l)
	}
	if !l.Alive() || !l.Answers() {
		t.Fatalf("alive %v, answers %v right after Launch", l.Alive(), l.Answers())
	}
	if pgid, err := syscall.Getpgid(l.PID); err != nil || pgid != l.PID {
		t.Errorf("process group of %d: %d, %v; want its own", l.PID, pgid, err)
	}
	if sid, err := unix.Getsid(l.PID); err != nil || sid != l.PID {
		t.Errorf("session of %d: %d, %v; want its own", l.PID, sid, err)
	}
	// A chosen port that is taken is refused before anything starts.
	if _, err := Launch(t.Context(), Spanner, l.Port(), logPath); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("Launch on a taken port: %v", err)
	}
	stopped, err := l.Stop(time.Second)
	if !stopped || err != nil {
		t.Fatalf("Stop = %v, %v", stopped, err)
	}
	// Gone, with its whole process group. (Whether its port answers is no
	// proof: another test process may have been given the same free port
	// since.) Stop returns once no process of the group runs; the leader,
	// this process's child, may stay a zombie until launchOnce's Wait
	// reaps it a moment later, and signal 0 reaches a zombie, so the
	// group's end is awaited, not sampled.
	if l.Alive() {
		t.Errorf("alive after Stop")
	}
	deadline := time.Now().Add(5 * time.Second)
	err = syscall.Kill(-l.PID, 0)
	for err == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		err = syscall.Kill(-l.PID, 0)
	}
	if !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d: %v 5s after Stop; want gone (ESRCH)", l.PID, err)
	}
	if stopped, err := l.Stop(time.Second); stopped || err != nil {
		t.Errorf("second Stop = %v, %v; want false, nil", stopped, err)
	}
}

func TestLaunchExitedBeforeAnswering(t *testing.T) {
	fakeSpanner(t, "exit")
	logPath := filepath.Join(t.TempDir(), "spanner.log")
	_, err := Launch(t.Context(), Spanner, 0, logPath)
	if !errors.Is(err, errExited) {
		t.Fatalf("Launch of an emulator that exits: %v", err)
	}
	// Three ports tried, each error with the log's end.
	if n := strings.Count(err.Error(), "boom: cannot start"); n != 3 {
		t.Errorf("error shows the log %d times, want 3:\n%v", n, err)
	}
	if !strings.Contains(err.Error(), logPath) {
		t.Errorf("error does not name the log %s:\n%v", logPath, err)
	}
}

// startGroup starts sh -c script as the leader of a new session.
func startGroup(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go cmd.Wait()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd
}

func TestAliveTellsAReusedPIDApart(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	cmd := startGroup(t, "sleep 60")
	pid := cmd.Process.Pid
	st, ok := procStat(pid)
	if !ok || st.startTicks == 0 {
		t.Fatalf("procStat(%d) = %+v, %v", pid, st, ok)
	}
	if l := (Launched{Kind: Spanner, PID: pid, StartTicks: st.startTicks}); !l.Alive() {
		t.Error("a running group whose leader started then: not alive")
	}
	other := Launched{Kind: Spanner, PID: pid, StartTicks: st.startTicks - 1}
	if other.Alive() {
		t.Error("a group whose leader started at another time (a reused PID): alive")
	}
	if stopped, err := other.Stop(time.Second); stopped || err != nil {
		t.Errorf("Stop of a group that is not ours = %v, %v; want false, nil", stopped, err)
	}
	if !groupRuns(pid) {
		t.Error("the other program's group was stopped")
	}
	for _, pid := range []int{0, 1, -5} {
		if (Launched{PID: pid}).Alive() {
			t.Errorf("PID %d alive", pid)
		}
	}
}

// A group that ignores SIGTERM (the leader and its child) is killed after
// the grace period.
func TestStopKillsAfterGrace(t *testing.T) {
	cmd := startGroup(t, `trap "" TERM; sleep 60 & wait`)
	l := Launched{Kind: Datastore, PID: cmd.Process.Pid}
	time.Sleep(100 * time.Millisecond) // the trap is set
	start := time.Now()
	stopped, err := l.Stop(300 * time.Millisecond)
	if !stopped || err != nil {
		t.Fatalf("Stop = %v, %v", stopped, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("stopped after %s, before the grace period: SIGTERM was not ignored?", d)
	}
	if groupRuns(l.PID) {
		t.Error("group still runs")
	}
}

func TestProcStat(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	st, ok := procStat(os.Getpid())
	if !ok || st.state != 'R' && st.state != 'S' || st.pgrp != syscall.Getpgrp() || st.startTicks == 0 {
		t.Errorf("procStat(self) = %+v, %v; want R or S, group %d, a start time", st, ok, syscall.Getpgrp())
	}
	if _, ok := procStat(-1); ok {
		t.Error("procStat(-1) ok")
	}
}

func TestEnsureSpannerDatabase(t *testing.T) {
	RequireSpanner(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := UniqueDatabaseID(t.Name())
	for i, want := range []bool{true, false} {
		created, err := EnsureSpannerDatabase(ctx, SpannerProject(), SpannerInstance(), db)
		if err != nil || created != want {
			t.Fatalf("call %d: created %v, %v; want %v", i+1, created, err, want)
		}
	}
	t.Cleanup(func() {
		_ = DropSpannerDatabase(context.Background(), fmt.Sprintf("projects/%s/instances/%s/databases/%s", SpannerProject(), SpannerInstance(), db))
	})
	if _, err := EnsureSpannerDatabase(ctx, SpannerProject(), SpannerInstance(), "Bad"); err == nil {
		t.Error("invalid database id accepted")
	}
}
