// Command workerpool is a Beam SDK worker pool for tests, the way
// distributed engines run Go SDK workers: a job server (prism here,
// Flink's or Spark's elsewhere) given --environment_type EXTERNAL and
// --environment_config HOST:PORT asks the pool to start one worker per
// job (BeamFnExternalWorkerPool.StartWorker), and to stop it when the job
// ends.
//
// Each worker is Beam's own boot program (sdks/go/container, built by
// scripts/test.sh), which fetches the worker binary the launcher staged
// with the job from the job server's artifact service and runs it, in a
// folder of its own: its working folder, its TMPDIR and its
// semi-persistent folder are ROOT/WORKER_ID, none of them the launcher's,
// so nothing may assume that a worker is the launching process or sees
// its files by relative path or under its temporary folder. Beam's own
// pool (boot --worker_pool) listens on port 50000 only and gives every
// worker the pool's folders, which is why this one exists.
//
// The pool appends one JSON line per worker started and stopped to
// ROOT/workers.jsonl ({"event":"start","id":...,"pid":...,"dir":...,
// "time":...}), so tests can tell which processes ran their jobs, and
// how many ran at once.
//
//	workerpool -port 0 -boot /path/to/boot -root /tmp/workers
//
// prints "listening on 127.0.0.1:PORT" once it serves.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"google.golang.org/grpc"
)

func main() {
	port := flag.Int("port", 0, "port to listen on, on 127.0.0.1 (0: any free one)")
	boot := flag.String("boot", "", "Beam's Go SDK boot program (go build github.com/apache/beam/sdks/v2/go/container)")
	root := flag.String("root", "", "folder under which each worker gets a folder of its own")
	flag.Parse()
	if *boot == "" || *root == "" {
		log.Fatal("workerpool: -boot and -root are required")
	}
	if err := os.MkdirAll(*root, 0o755); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		log.Fatal(err)
	}
	p := &pool{boot: *boot, root: *root, workers: map[string]*exec.Cmd{}}
	srv := grpc.NewServer()
	fnpb.RegisterBeamFnExternalWorkerPoolServer(srv, p)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		p.stopAll()
		srv.Stop()
	}()
	fmt.Printf("listening on %s\n", lis.Addr())
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}

type pool struct {
	fnpb.UnimplementedBeamFnExternalWorkerPoolServer
	boot, root string

	mu      sync.Mutex
	workers map[string]*exec.Cmd
	n       int
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func (p *pool) StartWorker(_ context.Context, req *fnpb.StartWorkerRequest) (*fnpb.StartWorkerResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := req.GetWorkerId()
	if _, ok := p.workers[id]; ok {
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("worker %q already runs", id)}, nil
	}
	p.n++
	dir := filepath.Join(p.root, fmt.Sprintf("%03d-%s", p.n, unsafeChars.ReplaceAllString(id, "_")))
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return &fnpb.StartWorkerResponse{Error: err.Error()}, nil
	}
	logf, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		return &fnpb.StartWorkerResponse{Error: err.Error()}, nil
	}
	cmd := exec.Command(p.boot,
		"--id="+id,
		"--control_endpoint="+req.GetControlEndpoint().GetUrl(),
		"--artifact_endpoint="+req.GetArtifactEndpoint().GetUrl(),
		"--provision_endpoint="+req.GetProvisionEndpoint().GetUrl(),
		"--logging_endpoint="+req.GetLoggingEndpoint().GetUrl(),
		"--semi_persist_dir="+dir,
	)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // boot and the worker it starts stop together
	if err := cmd.Start(); err != nil {
		logf.Close()
		return &fnpb.StartWorkerResponse{Error: fmt.Sprintf("starting boot for worker %s: %v", id, err)}, nil
	}
	p.workers[id] = cmd
	p.record("start", id, cmd.Process.Pid, dir)
	copied := make(chan string, 1)
	go func() { copied <- workerCopy(cmd.Process.Pid) }()
	go func() {
		_ = cmd.Wait()
		logf.Close()
		if d := <-copied; d != "" {
			_ = os.RemoveAll(d)
		}
		// The worker binary boot staged (a few hundred MB a job; a test
		// run starts dozens of jobs): the log and what the worker left
		// stay for the tests to look at.
		_ = os.RemoveAll(filepath.Join(dir, "staged"))
		p.mu.Lock()
		if p.workers[id] == cmd {
			delete(p.workers, id)
		}
		p.record("exit", id, cmd.Process.Pid, dir)
		p.mu.Unlock()
	}()
	return &fnpb.StartWorkerResponse{}, nil
}

func (p *pool) StopWorker(_ context.Context, req *fnpb.StopWorkerRequest) (*fnpb.StopWorkerResponse, error) {
	p.mu.Lock()
	cmd, ok := p.workers[req.GetWorkerId()]
	p.mu.Unlock()
	if !ok {
		return &fnpb.StopWorkerResponse{}, nil // ended already
	}
	stop(cmd)
	return &fnpb.StopWorkerResponse{}, nil
}

// stop ends a worker's process group: SIGTERM, then SIGKILL after 5 s.
func stop(cmd *exec.Cmd) {
	pid := cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	go func() {
		time.Sleep(5 * time.Second)
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}()
}

func (p *pool) stopAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cmd := range p.workers {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// record appends an event to ROOT/workers.jsonl; p.mu is held.
func (p *pool) record(event, id string, pid int, dir string) {
	line, _ := json.Marshal(map[string]any{"event": event, "id": id, "pid": pid, "dir": dir, "time": time.Now().UTC().Format(time.RFC3339Nano)})
	f, err := os.OpenFile(filepath.Join(p.root, "workers.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		log.Printf("workerpool: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}

// bootCopy is the folder boot makes for its copy of the worker binary:
// os.MkdirTemp("/tmp/", "bin*").
var bootCopy = regexp.MustCompile(`^/tmp/bin[0-9]+$`)

// workerCopy finds the folder boot copied the worker binary into before
// running it (a /tmp/bin* folder boot names and never removes; about the
// binary's size each), by watching the processes of the worker's group
// for one whose executable is there, for up to a minute. "" if none.
func workerCopy(pgid int) string {
	for range 300 {
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, proc := range procs {
			stat, err := os.ReadFile(filepath.Join(proc, "stat"))
			if err != nil {
				continue
			}
			// pid (comm) state ppid pgrp ...: comm may hold spaces.
			rest := stat[bytes.LastIndexByte(stat, ')')+1:]
			var state string
			var ppid, pgrp int
			if _, err := fmt.Sscan(string(rest), &state, &ppid, &pgrp); err != nil || pgrp != pgid {
				continue
			}
			exe, err := os.Readlink(filepath.Join(proc, "exe"))
			if dir := filepath.Dir(exe); err == nil && bootCopy.MatchString(dir) && filepath.Base(exe) == "worker" {
				return dir
			}
		}
		if syscall.Kill(-pgid, 0) != nil {
			return ""
		}
		time.Sleep(200 * time.Millisecond)
	}
	return ""
}
