package emulator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Default binary locations (google-cloud-sdk components); SPANNER_EMULATOR_BIN
// and FIRESTORE_EMULATOR_BIN override them, as in scripts/test.sh.
const (
	DefaultSpannerBin   = "/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/emulator_main"
	DefaultFirestoreBin = "/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud_firestore_emulator"
)

// ErrNotInstalled is returned by Start when an emulator binary is missing.
var ErrNotInstalled = errors.New("emulator not installed")

// Running is an emulator process started by Start.
type Running struct {
	Name string
	Host string // host:port
	cmd  *exec.Cmd
	log  string
}

// Stop ends the emulator and the processes it started.
func (r *Running) Stop() {
	if r == nil || r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	os.Remove(r.log)
}

// StartSpanner starts the Spanner emulator on a free loopback port and
// waits until it accepts connections.
func StartSpanner(ctx context.Context) (*Running, error) {
	bin, err := Binary(Spanner)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	r, err := start("spanner-emulator", bin, host, "--host_port="+host)
	if err != nil {
		return nil, err
	}
	return r, r.wait(ctx, func() bool {
		c, err := net.DialTimeout("tcp", host, 200*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// StartFirestore starts the Firestore emulator in Datastore mode on a free
// loopback port and waits until it answers HTTP.
func StartFirestore(ctx context.Context) (*Running, error) {
	bin, err := Binary(Datastore)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("127.0.0.1:%d", port)
	r, err := start("firestore-emulator", bin, host, "start", "--host=127.0.0.1", fmt.Sprintf("--port=%d", port), "--database-mode=datastore-mode")
	if err != nil {
		return nil, err
	}
	client := &http.Client{Timeout: time.Second}
	return r, r.wait(ctx, func() bool {
		resp, err := client.Get("http://" + host + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

func start(name, bin, host string, args ...string) (*Running, error) {
	log, err := os.CreateTemp("", "rekey-"+name+"-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	log.Close()
	return &Running{Name: name, Host: host, cmd: cmd, log: log.Name()}, nil
}

// wait polls ready for up to 60 s.
func (r *Running) wait(ctx context.Context, ready func() bool) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ready() {
			return nil
		}
		if r.cmd.ProcessState != nil {
			break
		}
		select {
		case <-ctx.Done():
			r.Stop()
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	tail, _ := os.ReadFile(r.log)
	if len(tail) > 2000 {
		tail = tail[len(tail)-2000:]
	}
	r.Stop()
	return fmt.Errorf("%s did not answer on %s within 60 s; its log ends:\n%s", r.Name, r.Host, tail)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Ensure makes both emulators available: those named by
// SPANNER_EMULATOR_HOST and DATASTORE_EMULATOR_HOST are used as they are,
// the others are started and their variables set. report, if not nil, is
// told what was used or started. stop ends what Ensure started.
func Ensure(ctx context.Context, report func(format string, args ...any)) (stop func(), err error) {
	if report == nil {
		report = func(string, ...any) {}
	}
	var started []*Running
	stop = func() {
		for _, r := range started {
			r.Stop()
		}
	}
	for _, em := range []struct {
		env   string
		start func(context.Context) (*Running, error)
	}{{EnvSpannerHost, StartSpanner}, {EnvDatastoreHost, StartFirestore}} {
		if h := os.Getenv(em.env); h != "" {
			// Fail now, not after the clients' retries, if nothing answers.
			c, err := net.DialTimeout("tcp", h, 10*time.Second)
			if err != nil {
				stop()
				return nil, fmt.Errorf("the emulator at %s=%s cannot be reached: %w", em.env, h, err)
			}
			c.Close()
			report("Using the emulator at %s=%s", em.env, h)
			continue
		}
		r, err := em.start(ctx)
		if err != nil {
			stop()
			return nil, err
		}
		started = append(started, r)
		os.Setenv(em.env, r.Host)
		report("Started the %s on %s", r.Name, r.Host)
	}
	return stop, nil
}
