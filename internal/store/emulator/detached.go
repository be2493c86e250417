package emulator

// Detached emulators outlive the process that starts them (`rekey emulators
// up`) and are stopped later by another process (`rekey emulators down`)
// from what was recorded about them: each runs as the leader of its own
// session and process group, with standard input from /dev/null and its
// output in a log file, so neither the terminal's hang-up nor a shell's
// command substitution waiting for end of file ties it to its starter.
// Stop ends the whole process group (the Firestore emulator's launcher
// script runs java as a child), politely first, as scripts/test.sh does.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

// Kind is an emulator Launch can start.
type Kind string

// The emulators.
const (
	// Spanner is the Cloud Spanner emulator (its gRPC port).
	Spanner Kind = "spanner"
	// Datastore is the Firestore emulator in Datastore mode.
	Datastore Kind = "datastore"
)

// Kinds lists the emulators in the order Launch's callers start them.
var Kinds = []Kind{Spanner, Datastore}

// LaunchTimeout is how long Launch waits for an emulator to answer.
const LaunchTimeout = 60 * time.Second

// kindSpec is how to find, start and probe one emulator.
type kindSpec struct {
	title          string // for messages
	binEnv, binDef string
	component      string // google-cloud-sdk component
	java           bool   // needs java on PATH
	hostEnv        string // the variable clients read
	args           func(port int) []string
	ready          func(host string) bool
}

var kindSpecs = map[Kind]kindSpec{
	Spanner: {
		title:  "Spanner emulator",
		binEnv: "SPANNER_EMULATOR_BIN", binDef: DefaultSpannerBin,
		component: "cloud-spanner-emulator",
		hostEnv:   EnvSpannerHost,
		args:      func(port int) []string { return []string{fmt.Sprintf("--host_port=127.0.0.1:%d", port)} },
		ready:     tcpAnswers,
	},
	Datastore: {
		title:  "Firestore emulator (Datastore mode)",
		binEnv: "FIRESTORE_EMULATOR_BIN", binDef: DefaultFirestoreBin,
		component: "cloud-firestore-emulator",
		java:      true,
		hostEnv:   EnvDatastoreHost,
		args: func(port int) []string {
			return []string{"start", "--host=127.0.0.1", fmt.Sprintf("--port=%d", port), "--database-mode=datastore-mode"}
		},
		ready: httpAnswers,
	},
}

func specOf(k Kind) (kindSpec, error) {
	s, ok := kindSpecs[k]
	if !ok {
		return kindSpec{}, fmt.Errorf("unknown emulator %q (want %s or %s)", k, Spanner, Datastore)
	}
	return s, nil
}

// Title is the emulator's name for messages, e.g. "Spanner emulator".
func (k Kind) Title() string { return kindSpecs[k].title }

// HostEnv is the variable the client libraries read the emulator's
// host:port from: EnvSpannerHost or EnvDatastoreHost.
func (k Kind) HostEnv() string { return kindSpecs[k].hostEnv }

// Binary returns the emulator's executable (its google-cloud-sdk path, or
// SPANNER_EMULATOR_BIN / FIRESTORE_EMULATOR_BIN), or an error wrapping
// ErrNotInstalled that says what to install.
func Binary(k Kind) (string, error) {
	s, err := specOf(k)
	if err != nil {
		return "", err
	}
	bin := envOr(s.binEnv, s.binDef)
	if fi, err := os.Stat(bin); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("%w: %s not found or not executable at %s (install the google-cloud-sdk component %s, e.g. `gcloud components install %s` or the google-cloud-cli-%s package, or set %s to its path)",
			ErrNotInstalled, s.title, bin, s.component, s.component, s.component, s.binEnv)
	}
	if s.java {
		if _, err := exec.LookPath("java"); err != nil {
			return "", fmt.Errorf("%w: the %s needs Java 17 or newer (java not found on PATH)", ErrNotInstalled, s.title)
		}
	}
	return bin, nil
}

// Launched is an emulator started by Launch: what another process needs
// to find it, check it and stop it.
type Launched struct {
	Kind Kind   `json:"kind"`
	Host string `json:"host"` // 127.0.0.1:port
	// PID is the emulator's process id, which is also its session and
	// process group id.
	PID int `json:"pid"`
	// StartTicks is when the process started, in clock ticks after boot
	// (Linux's /proc; 0 elsewhere): a reused PID has another.
	StartTicks uint64 `json:"start_ticks,omitempty"`
	Bin        string `json:"bin"` // the executable
	Log        string `json:"log"` // its output
}

// Launch starts emulator k detached (see the file comment) on 127.0.0.1:
// port, or on a free port when port is 0, with its output in logPath
// (truncated), and waits up to LaunchTimeout until it answers. On a free
// port it tries up to 3 ports, in case another process takes the one it
// chose meanwhile. A port that is in use is an error.
func Launch(ctx context.Context, k Kind, port int, logPath string) (Launched, error) {
	bin, err := Binary(k)
	if err != nil {
		return Launched{}, err
	}
	if port != 0 {
		if err := portFree(port); err != nil {
			return Launched{}, fmt.Errorf("%s: %w", k.Title(), err)
		}
		return launchOnce(ctx, k, bin, port, logPath)
	}
	var errs []error
	for range 3 {
		p, err := freePort()
		if err != nil {
			return Launched{}, err
		}
		l, err := launchOnce(ctx, k, bin, p, logPath)
		if err == nil || !errors.Is(err, errExited) {
			return l, err
		}
		errs = append(errs, err)
	}
	return Launched{}, errors.Join(errs...)
}

// errExited marks an emulator that exited before answering.
var errExited = errors.New("exited before answering")

func launchOnce(ctx context.Context, k Kind, bin string, port int, logPath string) (Launched, error) {
	s := kindSpecs[k]
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return Launched{}, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return Launched{}, fmt.Errorf("%s log: %w", s.title, err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, s.args(port)...)
	cmd.Stdout, cmd.Stderr = logf, logf // stdin: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Launched{}, fmt.Errorf("starting the %s (%s): %w", s.title, bin, err)
	}
	// Reaps the process should it end while this one runs; it is not
	// waited for, so the emulator outlives this process.
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	l := Launched{Kind: k, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), PID: cmd.Process.Pid, Bin: bin, Log: logPath}
	if st, ok := procStat(l.PID); ok {
		l.StartTicks = st.startTicks
	}
	if err := l.waitReady(ctx, exited); err != nil {
		_, _ = l.Stop(5 * time.Second)
		return Launched{}, err
	}
	return l, nil
}

func (l Launched) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, LaunchTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !l.Answers() {
		select {
		case <-exited:
			return fmt.Errorf("the %s %w on %s; %s", l.Kind.Title(), errExited, l.Host, l.logTail())
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the %s did not answer on %s within %s; %s", l.Kind.Title(), l.Host, LaunchTimeout, l.logTail())
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

func (l Launched) logTail() string {
	b, err := os.ReadFile(l.Log)
	if err != nil {
		return "no log: " + err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("its log %s ends:\n%s", l.Log, b)
}

// Port is the port of l.Host (0 if it has none).
func (l Launched) Port() int {
	_, p, err := net.SplitHostPort(l.Host)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(p)
	return n
}

// Answers reports whether the emulator accepts requests on l.Host.
func (l Launched) Answers() bool {
	s, err := specOf(l.Kind)
	return err == nil && s.ready(l.Host)
}

// Alive reports whether l's process group still has running processes
// and is l's: while its leader runs, the leader must have started when
// l's did (a process id can be reused once the leader and its group are
// gone; the kernel does not reuse the id of a live group).
func (l Launched) Alive() bool {
	if l.PID <= 1 || !groupRuns(l.PID) {
		return false
	}
	st, ok := procStat(l.PID)
	if !ok || st.state == 'Z' || l.StartTicks == 0 {
		return true // the leader is gone (or no /proc): its group lives on
	}
	return st.startTicks == l.StartTicks
}

// Stop ends l's process group: SIGTERM, then SIGKILL when processes are
// left after grace. It reports whether there was anything to stop.
func (l Launched) Stop(grace time.Duration) (bool, error) {
	if !l.Alive() {
		return false, nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if err := syscall.Kill(-l.PID, sig); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return true, nil
			}
			return true, fmt.Errorf("stopping the %s (process group %d): %w", l.Kind.Title(), l.PID, err)
		}
		if groupEnds(l.PID, grace) {
			return true, nil
		}
	}
	return true, fmt.Errorf("the %s (process group %d) is still running after SIGKILL", l.Kind.Title(), l.PID)
}

// groupEnds waits up to d for process group pgid to have no running
// process.
func groupEnds(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for groupRuns(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// groupRuns reports whether process group pgid has a process of this
// user that is not a zombie. Where a dead child's parent does not reap it
// (a container whose init does not), a stopped emulator stays in the
// process table as a zombie, which signal 0 cannot tell from a live one;
// /proc can. Without /proc, signal 0 decides.
func groupRuns(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); err != nil {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok && st.pgrp == pgid && st.state != 'Z' && st.state != 'X' {
			return true
		}
	}
	return false
}

// stat is what procStat reads of a process.
type stat struct {
	state      byte // R, S, Z, ...
	pgrp       int
	startTicks uint64 // clock ticks after boot
}

// procStat reads /proc/PID/stat: "PID (COMM) STATE PPID PGRP ...", where
// COMM may hold spaces and parentheses and the start time is the 22nd
// field.
func procStat(pid int) (stat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return stat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:])) // from the 3rd field on
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, false
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	return stat{state: f[0][0], pgrp: pgrp, startTicks: start}, err1 == nil && err2 == nil
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port %d on 127.0.0.1 is in use (choose another, or 0 for a free one)", port)
	}
	return l.Close()
}

func tcpAnswers(host string) bool {
	c, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
	if err == nil {
		c.Close()
	}
	return err == nil
}

func httpAnswers(host string) bool {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + host + "/")
	if err == nil {
		resp.Body.Close()
	}
	return err == nil
}

// EnsureSpannerDatabase creates the instance (EnsureInstance) and the
// empty database dbName in it on the Spanner emulator at
// SPANNER_EMULATOR_HOST, unless they exist; created says whether the
// database was created.
func EnsureSpannerDatabase(ctx context.Context, project, instanceID, dbName string) (created bool, err error) {
	if err := EnsureInstance(ctx, project, instanceID); err != nil {
		return false, err
	}
	if err := checkDatabaseID(dbName); err != nil {
		return false, err
	}
	c, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return false, fmt.Errorf("spanner database admin client: %w", err)
	}
	defer c.Close()
	path := spannerdb.DatabasePath(project, instanceID, dbName)
	if _, err := c.GetDatabase(ctx, &databasepb.GetDatabaseRequest{Name: path}); err == nil {
		return false, nil
	} else if status.Code(err) != codes.NotFound {
		return false, fmt.Errorf("get spanner database %s: %w", path, err)
	}
	op, err := c.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          fmt.Sprintf("projects/%s/instances/%s", project, instanceID),
		CreateStatement: "CREATE DATABASE `" + dbName + "`",
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	switch {
	case status.Code(err) == codes.AlreadyExists:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("create spanner database %s: %w", path, err)
	}
	return true, nil
}
