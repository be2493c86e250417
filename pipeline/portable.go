package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/xlangx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/extworker"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/universal/runnerlib"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"

	"github.com/rekeyio/rekey/migration"
)

// runPortable runs p on a portable runner's job service as Beam's prism
// and universal runners do (prism.Execute, universal.Execute,
// runnerlib.Execute), but keeps the job's id to read its metrics from the
// job service (GetJobMetrics) while it runs, for the progress line, and
// when it is done, for the result.
//
// The job service is --endpoint; for prism without one, an in-process
// prism job server (one per process, as prism.Execute starts) with the
// SDK worker in loopback mode unless --environment_type says otherwise.
func runPortable(ctx context.Context, r Runner, p *beam.Pipeline, start time.Time, res *migration.Result) error {
	if !beam.Initialized() {
		return errors.New("beam.Init was not called before the pipeline was built")
	}
	j, err := submit(ctx, r.Runner, p)
	if err != nil {
		return err
	}
	defer j.close()
	res.JobID = j.id

	waited := make(chan error, 1)
	go func() { waited <- runnerlib.WaitForCompletion(ctx, j.client, j.id) }()
	stop := startProgress(ctx, r.Progress, start, func() migration.Counters {
		c, _ := j.counters(ctx, time.Second, true)
		return c
	}, r.total, r.counts)
	err = <-waited
	stop()
	if ctx.Err() != nil {
		res.Stop = j.stop(ctx, r.Runner)
	}
	c, merr := j.counters(context.WithoutCancel(ctx), 30*time.Second, false)
	res.Counters = c
	if c == nil {
		res.Counters = migration.Counters{}
	}
	return errors.Join(err, merr)
}

// stopWait bounds how long a stopped run waits for its job to end.
const stopWait = 30 * time.Second

// stop cancels the job and waits, stopWait at most, until the job server
// reports it ended (DONE, CANCELLED or FAILED), saying what it reported.
// A job server may report the job cancelled while bundles are still in
// flight on its workers (prism does): that is said too (migration.Stop).
func (j *portableJob) stop(ctx context.Context, runner string) *migration.Stop {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopWait)
	defer cancel()
	s := &migration.Stop{State: "unknown", InProcess: InProcess(runner)}
	defer func() { s.Waited = time.Since(start) }()
	if _, err := j.client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: j.id}); err != nil {
		s.State = "cancel refused: " + err.Error()
		return s
	}
	for {
		resp, err := j.client.GetState(ctx, &jobpb.GetJobStateRequest{JobId: j.id})
		if err == nil {
			s.State = resp.GetState().String()
			switch resp.GetState() {
			case jobpb.JobState_DONE, jobpb.JobState_CANCELLED, jobpb.JobState_FAILED:
				s.Confirmed = true
				return s
			}
		}
		select {
		case <-ctx.Done():
			return s
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// portableJob is a job submitted to a job service.
type portableJob struct {
	client jobpb.JobServiceClient
	id     string
	pipe   *pipepb.Pipeline
	close  func()
}

// counters reads the job's "rekey" counters from the job service (see
// addCounters for live).
func (j *portableJob) counters(ctx context.Context, timeout time.Duration, live bool) (migration.Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := j.client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: j.id})
	if err != nil {
		return nil, fmt.Errorf("metrics of job %s: %w", j.id, err)
	}
	m := resp.GetMetrics()
	c := migration.Counters{}
	addCounters(c, *metricsx.FromMonitoringInfos(j.pipe, m.GetAttempted(), m.GetCommitted()), live)
	return c, nil
}

var (
	localPrismOnce   sync.Once
	localPrismClient jobpb.JobServiceClient
	errLocalPrism    error
)

// localPrism returns a client of this process's in-process prism job
// server, started on first use. Jobs share the server as they share a
// machine; each has its own id, metrics and loopback worker.
func localPrism() (jobpb.JobServiceClient, error) {
	localPrismOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		localPrismClient, errLocalPrism = prism.CreateJobServer(ctx, prism.Options{})
	})
	return localPrismClient, errLocalPrism
}

// submitMu serialises job preparation and staging. runnerlib.Prepare
// writes Beam's global pipeline options from the flags; and prism's job
// server (v2.77) stores staged artifacts in a map without a lock, so two
// jobs staging at once crash it with "concurrent map writes". Holding the
// lock through Stage keeps the jobs of one process apart; two processes
// staging on one job server at the same moment are not (docs/limits.md).
var submitMu sync.Mutex

// submit translates p and submits it to the runner's job service.
func submit(ctx context.Context, runner string, p *beam.Pipeline) (_ *portableJob, err error) {
	j := &portableJob{close: func() {}}
	var cleanups []func()
	j.close = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	defer func() {
		if err != nil {
			j.close()
		}
	}()

	envType := strings.ToLower(*jobopts.EnvironmentType)
	if endpoint := *jobopts.Endpoint; runner == "prism" && endpoint == "" {
		if j.client, err = localPrism(); err != nil {
			return nil, fmt.Errorf("starting prism: %w", err)
		}
		if envType == "" {
			envType = "loopback"
		}
	} else {
		if endpoint == "" {
			return nil, errors.New("no job service endpoint: use --endpoint=HOST:PORT")
		}
		cc, err := grpcx.Dial(ctx, endpoint, 2*time.Minute)
		if err != nil {
			return nil, fmt.Errorf("connecting to the job service at %s: %w", endpoint, err)
		}
		cleanups = append(cleanups, func() { _ = cc.Close() })
		j.client = jobpb.NewJobServiceClient(cc)
	}

	edges, _, err := p.Build()
	if err != nil {
		return nil, err
	}
	loopback := envType == "loopback"
	getEnvConfig := jobopts.GetEnvironmentConfig
	if loopback {
		srv, err := extworker.StartLoopback(ctx, 0)
		if err != nil {
			return nil, err
		}
		cleanups = append(cleanups, func() {
			// A job stopped by its context may not have started its
			// worker yet: prism (v2.77) then still asks this server for
			// one, and panics, ending the process with nothing said, when
			// the server is gone or refuses. The server of a stopped run
			// is left to the process's exit.
			if ctx.Err() == nil {
				_ = srv.Stop(context.Background())
			}
		})
		getEnvConfig = srv.EnvironmentConfig
	}
	xlangx.ResolveArtifacts(ctx, edges, nil)
	env, err := graphx.CreateEnvironment(ctx, environmentURN(envType), getEnvConfig)
	if err != nil {
		return nil, fmt.Errorf("generating the model pipeline: %w", err)
	}
	if j.pipe, err = graphx.Marshal(edges, &graphx.Options{
		Environment:           env,
		PipelineResourceHints: jobopts.GetPipelineResourceHints(),
	}); err != nil {
		return nil, fmt.Errorf("generating the model pipeline: %w", err)
	}

	opt := &runnerlib.JobOptions{
		Name:         jobopts.GetJobName(),
		Experiments:  jobopts.GetExperiments(),
		Worker:       *jobopts.WorkerBinary,
		RetainDocker: *jobopts.RetainDockerContainers,
		Parallelism:  *jobopts.Parallelism,
		Loopback:     loopback,
	}
	bin := opt.Worker
	switch {
	case loopback:
		// The loopback worker is this process; the binary is not used.
		f, err := os.CreateTemp("", "rekey-loopback-worker-*")
		if err != nil {
			return nil, err
		}
		_ = f.Close()
		bin = f.Name()
		cleanups = append(cleanups, func() { _ = os.Remove(bin) })
	case bin == "":
		if bin, err = selfWorker(runtime.GOOS, runtime.GOARCH); err != nil {
			return nil, err
		}
	}
	if err := runnerlib.UpdateGoEnvironmentWorker(bin, j.pipe); err != nil {
		return nil, err
	}
	if token, prepID, err := prepareAndStage(ctx, j.client, j.pipe, opt, bin); err != nil {
		return nil, err
	} else if j.id, err = runnerlib.Submit(ctx, j.client, prepID, token); err != nil {
		return nil, err
	}
	return j, nil
}

// prepareAndStage prepares the job and stages its worker under submitMu.
func prepareAndStage(ctx context.Context, client jobpb.JobServiceClient, pipe *pipepb.Pipeline, opt *runnerlib.JobOptions, bin string) (token, prepID string, err error) {
	submitMu.Lock()
	defer submitMu.Unlock()
	prepID, artifacts, token, err := runnerlib.Prepare(ctx, client, pipe, opt)
	if err != nil {
		return "", "", err
	}
	token, err = runnerlib.Stage(ctx, prepID, artifacts, bin, token)
	return token, prepID, err
}

// environmentURN is jobopts.GetEnvironmentUrn for envType.
func environmentURN(envType string) string {
	switch envType {
	case "process":
		return graphx.URNEnvProcess
	case "loopback", "external":
		return graphx.URNEnvExternal
	default:
		return graphx.URNEnvDocker
	}
}

// WorkerPlatform is the platform of the SDK workers of Beam's Go
// containers, Dataflow's and a job server's worker pool: the binary a job
// stages must run there.
const WorkerPlatform = "linux/amd64"

// selfWorker is the worker binary a job stages when --worker_binary is
// not given: this program's own executable, which serves as a worker
// when started with --worker (rekey's main, or a test binary whose
// TestMain calls beam.Init), if it runs on the workers' platform. Beam
// would otherwise compile the program from its source folder, which a
// rekey installed with go install does not have.
func selfWorker(goos, goarch string) (string, error) {
	if goos+"/"+goarch != WorkerPlatform {
		return "", fmt.Errorf("the job's workers run %s and this rekey was built for %s/%s: build rekey for them (GOOS=linux GOARCH=amd64 go build -o rekey-linux-amd64 ./cmd/rekey) and pass --worker_binary=rekey-linux-amd64", WorkerPlatform, goos, goarch)
	}
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("finding this program to stage as the job's worker binary: %w (pass --worker_binary=PATH)", err)
	}
	return self, nil
}

// SetWorkerBinary sets Beam's --worker_binary to this program's own
// executable (selfWorker) for a runner that stages one (dataflow) when
// it is not set, so that Beam does not try to compile the program from
// source.
func SetWorkerBinary(runner string) error {
	if runner != "dataflow" || *jobopts.WorkerBinary != "" {
		return nil
	}
	bin, err := selfWorker(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return err
	}
	*jobopts.WorkerBinary = bin
	return nil
}
