package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/internal/testkit/golden"
	"github.com/rekeyio/rekey/migration"
	"github.com/rekeyio/rekey/migration/config"
	"github.com/rekeyio/rekey/pipeline"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rekeyer"
	"github.com/rekeyio/rekey/rewrite"
)

// checkSplitsGolden compares got with testdata/splits/name.golden.
func checkSplitsGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "splits", name+".golden"), got)
}

// splitsConfig is a Spanner-to-Spanner migration of UserAccessLogs; %s
// is the test's folder, REWRITE the rewrite.
const splitsConfig = `
source: {type: spanner, project: rekey-demo, instance: rekey, database: old, table: UserAccessLogs}
target: {type: spanner, project: rekey-demo, instance: rekey, database: new, table: UserAccessLogsByUser}
interleaved: [UserAccessEvents]
rewrite: REWRITE
dead_letter: "%s/dead.jsonl"
`

const userAccessKey = "LastAccess TIMESTAMP, UserId STRING(MAX)"

// splitsNow is the clock of the tests: points expire --expire after it.
var splitsNow = time.Date(2025, 3, 1, 9, 30, 0, 0, time.UTC)

// fakeResolve resolves a config as migration.Resolve would for a source
// table of key sourceKey with one interleaved child, without a database.
func fakeResolve(sourceKey string) func(context.Context, *config.Config) (*migration.Job, error) {
	return func(_ context.Context, cfg *config.Config) (*migration.Job, error) {
		in, err := rewrite.ParseKeySchema(cfg.Source.Table, sourceKey)
		if err != nil {
			return nil, err
		}
		st, err := rewrite.New(cfg.Rewrite.Step())
		if err != nil {
			return nil, err
		}
		r, err := st.Spanner(in)
		if err != nil {
			return nil, err
		}
		return &migration.Job{
			Config: cfg, SourceKey: in, TargetKey: r.Out(),
			Spec: rekeyer.Spec{Strategy: cfg.Rewrite.Step(), Table: cfg.Source.Table, TargetTable: cfg.Target.Table},
			Spanner: &migration.SpannerSchemas{Targets: []*spannerdb.Table{
				{Name: cfg.Target.Table, Key: r.Out()},
				{Name: "UserAccessEvents", Parent: cfg.Target.Table},
			}},
		}, nil
	}
}

// noSample fails the test if the source is sampled.
func noSample(t *testing.T) func(context.Context, *migration.Job, pipeline.Runner, int) ([]record.Record, error) {
	return func(context.Context, *migration.Job, pipeline.Runner, int) ([]record.Record, error) {
		t.Error("the source was sampled for a uniform rewrite")
		return nil, errors.New("no sample")
	}
}

// runSplitsCmd runs `rekey splits` on splitsConfig with rewriteYAML and env, and
// returns stdout, stderr and the exit code.
func runSplitsCmd(t *testing.T, rewriteYAML string, env splitsEnv, args ...string) (string, string, int) {
	t.Helper()
	keepBeamGlobals(t)
	file := writeTestConfig(t, strings.Replace(splitsConfig, "REWRITE", rewriteYAML, 1))
	var out, errb bytes.Buffer
	if env.now == nil {
		env.now = func() time.Time { return splitsNow }
	}
	if env.admin == nil {
		env.admin = func(context.Context) (splitAdder, error) {
			t.Error("the admin API was called without --apply")
			return nil, errors.New("no admin")
		}
	}
	cmd := splitsCommand(&factory{IO: stdio{in: strings.NewReader(""), out: &out, err: &errb}}, env)
	_, err := execCmd(t, cmd, append([]string{"-c", file}, args...)...)
	code := exitCode(err, &errb)
	return out.String(), strings.ReplaceAll(errb.String(), filepath.Dir(file), "DIR"), code
}

func TestSplitsUniform(t *testing.T) {
	env := splitsEnv{resolve: fakeResolve(userAccessKey), sample: noSample(t)}
	out, errs, code := runSplitsCmd(t, `{strategy: shard, params: {n: 64}}`, env, "--nodes", "2", "--per-node", "5", "--expire", "48h")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	checkSplitsGolden(t, "shard.txt", out)
	checkSplitsGolden(t, "shard.stderr", errs)
}

func TestSplitsQuantiles(t *testing.T) {
	var asked int
	env := splitsEnv{
		resolve: fakeResolve(userAccessKey),
		sample: func(_ context.Context, j *migration.Job, r pipeline.Runner, n int) ([]record.Record, error) {
			asked = n
			if r.Runner != "prism" {
				t.Errorf("sampled on runner %q, want the default prism", r.Runner)
			}
			// The rewritten keys of users u00..u39, user i with i+1 rows.
			var recs []record.Record
			for u := range 40 {
				for h := 0; h <= u; h++ {
					recs = append(recs, record.Record{Table: j.Config.Target.Table, Fields: []record.Field{
						{Name: "UserId", Value: record.String(fmt.Sprintf("u,%02d", u))},
						{Name: "LastAccess", Value: record.Time(time.Date(2024, 5, 1, h, 0, 0, 0, time.UTC))},
					}})
				}
			}
			return recs, nil
		},
	}
	out, errs, code := runSplitsCmd(t, `{strategy: swap, params: {order: [UserId]}}`, env, "--nodes", "3")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if asked != 10_000 {
		t.Errorf("sampled %d keys, want 10000 (at least 10,000; 100 a point is 3000)", asked)
	}
	checkSplitsGolden(t, "swap.txt", out)
	checkSplitsGolden(t, "swap.stderr", errs)
	if n := strings.Count(out, "\n"); n != 30 {
		t.Errorf("%d points, want 30 (3 nodes × 10)", n)
	}
	_, _, _ = runSplitsCmd(t, `{strategy: swap, params: {order: [UserId]}}`, env, "--nodes", "3", "--sample", "500")
	if asked != 500 {
		t.Errorf("--sample 500: sampled %d keys", asked)
	}
}

func TestSplitsSampleFails(t *testing.T) {
	env := splitsEnv{resolve: fakeResolve(userAccessKey), sample: func(context.Context, *migration.Job, pipeline.Runner, int) ([]record.Record, error) {
		return nil, errors.New("sampling is not built yet")
	}}
	_, errs, code := runSplitsCmd(t, `{strategy: none}`, env, "--nodes", "1")
	if want := "none does not spread keys uniformly, so the points are quantiles of a sample of rewritten keys: sampling is not built yet"; code != exitFailure || !strings.Contains(errs, want) {
		t.Errorf("exit %d, stderr %q; want exit %d saying %q", code, errs, exitFailure, want)
	}
}

// TestSplitsFiles writes more than 100 points: gcloud takes 100 a file.
func TestSplitsFiles(t *testing.T) {
	env := splitsEnv{resolve: fakeResolve("Id INT64"), sample: noSample(t)}
	dir := t.TempDir()
	out, errs, code := runSplitsCmd(t, `{strategy: bitreverse}`, env, "--nodes", "25", "--out", filepath.Join(dir, "splits.txt"))
	if code != exitOK || out != "" {
		t.Fatalf("exit %d, stdout %q\n%s", code, out, errs)
	}
	var lines []string
	for i, want := range []int{100, 100, 50} {
		path := filepath.Join(dir, fmt.Sprintf("splits-%d.txt", i+1))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		l := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(l) != want {
			t.Errorf("%s: %d points, want %d", path, len(l), want)
		}
		lines = append(lines, l...)
		if !strings.Contains(errs, "--splits-file="+path) {
			t.Errorf("stderr has no gcloud command for %s:\n%s", path, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "splits.txt")); err == nil {
		t.Error("splits.txt was written too")
	}
	if lines[0] != "TABLE UserAccessLogsByUser ('36746502138863648')" || len(lines) != 250 {
		t.Errorf("first point %q of %d", lines[0], len(lines))
	}
	// To standard output all go out, with a note.
	out, errs, _ = runSplitsCmd(t, `{strategy: bitreverse}`, env, "--nodes", "25")
	if strings.Join(lines, "\n")+"\n" != out || !strings.Contains(errs, "gcloud takes at most 100 points a file") {
		t.Errorf("stdout: %d bytes; stderr:\n%s", len(out), errs)
	}
}

// fakeAdmin is an in-process database admin server that records the
// AddSplitPoints requests it gets.
type fakeAdmin struct {
	databasepb.UnimplementedDatabaseAdminServer
	mu   sync.Mutex
	reqs []*databasepb.AddSplitPointsRequest
}

func (s *fakeAdmin) AddSplitPoints(_ context.Context, req *databasepb.AddSplitPointsRequest) (*databasepb.AddSplitPointsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	return &databasepb.AddSplitPointsResponse{}, nil
}

// serveAdmin serves srv on a local port for the test and returns how to
// connect the real admin client to it.
func serveAdmin(t *testing.T, srv databasepb.DatabaseAdminServer) func(context.Context) (splitAdder, error) {
	t.Helper()
	t.Setenv("SPANNER_EMULATOR_HOST", "")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	databasepb.RegisterDatabaseAdminServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return adminClient(option.WithEndpoint(lis.Addr().String()), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
}

func TestSplitsApply(t *testing.T) {
	fake := &fakeAdmin{}
	env := splitsEnv{resolve: fakeResolve(userAccessKey), sample: noSample(t), admin: serveAdmin(t, fake)}
	out, errs, code := runSplitsCmd(t, `{strategy: shard, params: {n: 1000, mode: abs}}`, env, "--nodes", "21", "--apply", "--expire", "72h")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	if want := "rekey: added 210 split points to projects/rekey-demo/instances/rekey/databases/new in 3 requests; they expire at 2025-03-04T09:30:00Z"; !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	if len(fake.reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(fake.reqs))
	}
	var sent []string
	for i, req := range fake.reqs {
		if req.Database != "projects/rekey-demo/instances/rekey/databases/new" || req.Initiator != "rekey" || len(req.SplitPoints) != 1 {
			t.Fatalf("request %d: database %q, initiator %q, %d split point groups", i+1, req.Database, req.Initiator, len(req.SplitPoints))
		}
		sp := req.SplitPoints[0]
		if sp.Table != "UserAccessLogsByUser" || sp.Index != "" || !sp.ExpireTime.AsTime().Equal(splitsNow.Add(72*time.Hour)) {
			t.Errorf("request %d: table %q, index %q, expires %v", i+1, sp.Table, sp.Index, sp.ExpireTime.AsTime())
		}
		if want := []int{100, 100, 10}[i]; len(sp.Keys) != want {
			t.Errorf("request %d: %d points, want %d", i+1, len(sp.Keys), want)
		}
		for _, k := range sp.Keys {
			if len(k.KeyParts.Values) != 1 {
				t.Fatalf("key %v: want the ShardId only", k.KeyParts)
			}
			sv, ok := k.KeyParts.Values[0].Kind.(*structpb.Value_StringValue)
			if !ok {
				t.Fatalf("key part %v: INT64 goes as a string", k.KeyParts.Values[0])
			}
			sent = append(sent, sv.StringValue)
		}
	}
	// The points sent are those written, in order.
	var file []string
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		file = append(file, strings.TrimSuffix(strings.TrimPrefix(l, "TABLE UserAccessLogsByUser ('"), "')"))
	}
	if strings.Join(sent, ",") != strings.Join(file, ",") {
		t.Errorf("sent %v\nwritten %v", sent, file)
	}
	if sent[0] != "4" || sent[209] != "995" {
		t.Errorf("first and last ShardId %s, %s; want 4 and 995 (1000 shards cut in 211)", sent[0], sent[209])
	}
}

func TestSplitsApplyUnimplemented(t *testing.T) {
	env := splitsEnv{resolve: fakeResolve(userAccessKey), sample: noSample(t), admin: serveAdmin(t, &databasepb.UnimplementedDatabaseAdminServer{})}
	file := filepath.Join(t.TempDir(), "splits.txt")
	_, errs, code := runSplitsCmd(t, `{strategy: uuid}`, env, "--nodes", "1", "--apply", "--out", file)
	if code != exitFailure || !strings.Contains(errs, "rekey: "+errEmulatorSplits+"\n") {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errs, exitFailure, errEmulatorSplits)
	}
	if b, err := os.ReadFile(file); err != nil || strings.Count(string(b), "\n") != 10 {
		t.Errorf("the splits file for gcloud: %v, %q", err, b)
	}
}

func TestSplitsUsageErrors(t *testing.T) {
	keepBeamGlobals(t)
	spanner := writeTestConfig(t, strings.Replace(splitsConfig, "REWRITE", "{strategy: hashprefix}", 1))
	ds := writeTestConfig(t, filesConfig)
	dsTarget := writeTestConfig(t, `
source: {type: jsonl, path: "%s/in.jsonl"}
target: {type: datastore, project: p, kind: K}
rewrite: {strategy: hashprefix}
`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "3"}, "splits: -c FILE is required"},
		{[]string{"-c", spanner}, "splits: --nodes N is required"},
		{[]string{"-c", spanner, "--nodes", "0"}, "splits: --nodes N is required"},
		{[]string{"-c", spanner, "--nodes", "2", "--per-node", "0"}, "--per-node must be at least 1, got 0"},
		{[]string{"-c", spanner, "--nodes", "2", "--expire", "721h"}, "--expire 721h0m0s is more than Spanner allows for split points: at most 720h (30 days)"},
		{[]string{"-c", spanner, "--nodes", "2", "--expire", "0s"}, "--expire must be positive, got 0s"},
		{[]string{"-c", spanner, "--nodes", "2", "--expire", "-1h"}, "--expire must be positive"},
		{[]string{"-c", spanner, "--nodes", "2", "--expire", "ten days"}, `invalid argument "ten days" for "--expire"`},
		{[]string{"-c", spanner, "--nodes", "2", "--sample", "-1"}, "--sample must be 0"},
		{[]string{"-c", spanner, "--nodes", "2", "--index", "ByEmail"}, "--index ByEmail: split points for indexes are not supported yet"},
		{[]string{"-c", spanner, "--nodes", "2", "--nodez", "2"}, "flag provided but not defined: --nodez (did you mean --nodes?)"},
		{[]string{"-c", spanner, "--nodes", "2", "extra"}, "splits: unexpected arguments: extra"},
		{[]string{"-c", ds, "--nodes", "2"}, "the target is jsonl: split points are a Spanner feature"},
		{[]string{"-c", dsTarget, "--nodes", "2"}, "the target is datastore: split points are a Spanner feature"},
		{[]string{"-c", "/nonexistent/rekey.yaml", "--nodes", "2"}, "/nonexistent/rekey.yaml"},
	} {
		out, errs, code := rekey(t, "", append([]string{"splits"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d saying %q", tc.args, code, out, errs, exitUsage, tc.want)
		}
	}
}

func TestSplitsConfigError(t *testing.T) {
	env := splitsEnv{resolve: func(context.Context, *config.Config) (*migration.Job, error) {
		return migration.Resolve(context.Background(), &config.Config{Source: config.Endpoint{Type: config.TypeJSONL, Key: "Id"}, Target: config.Endpoint{Type: config.TypeJSONL}})
	}}
	_, errs, code := runSplitsCmd(t, `{strategy: none}`, env, "--nodes", "1")
	if code != exitUsage || !strings.Contains(errs, "source.key") {
		t.Errorf("a config the job cannot be resolved from: exit %d, stderr %q; want a usage error naming source.key", code, errs)
	}
}

// TestSplitsEmulator resolves a real config against the Spanner emulator,
// which does not implement AddSplitPoints: --apply says so plainly.
func TestSplitsEmulator(t *testing.T) {
	keepBeamGlobals(t)
	_, path := emulator.TestDBPath(t, `CREATE TABLE Logs (Id INT64 NOT NULL, Page STRING(MAX)) PRIMARY KEY (Id)`)
	p, inst, db := emulator.SpannerProject(), emulator.SpannerInstance(), filepath.Base(path)
	file := writeTestConfig(t, `
source: {type: spanner, project: `+p+`, instance: `+inst+`, database: `+db+`, table: Logs}
target: {type: spanner, project: `+p+`, instance: `+inst+`, database: `+db+`, table: LogsByHash}
rewrite: {strategy: hashprefix, params: {n: 2}}
dead_letter: "%s/dead.jsonl"
`)
	out, errs, code := rekey(t, "", "splits", "-c", file, "--nodes", "1", "--apply")
	if code != exitFailure || !strings.Contains(errs, errEmulatorSplits) {
		t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, errs, exitFailure, errEmulatorSplits)
	}
	if !strings.HasPrefix(out, "TABLE LogsByHash ('17')\n") || strings.Count(out, "\n") != 10 {
		t.Errorf("stdout:\n%s", out)
	}
}
