// Package emulator connects rekey to the local Google emulators: the Cloud
// Spanner emulator and the Firestore emulator in Datastore mode.
//
// The emulators come with the machine image (google-cloud-sdk components
// cloud-spanner-emulator and cloud-firestore-emulator); scripts/test.sh
// starts both and exports SPANNER_EMULATOR_HOST and DATASTORE_EMULATOR_HOST.
// The Google client libraries read those variables themselves; every
// function here refuses to run without them, so nothing in this package can
// reach a real Google Cloud project by accident.
//
// The functions in this file are usable outside tests (a demo command, for
// instance); testing.go holds the helpers for tests.
package emulator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"cloud.google.com/go/datastore"
	database "cloud.google.com/go/spanner/admin/database/apiv1"
	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	instance "cloud.google.com/go/spanner/admin/instance/apiv1"
	"cloud.google.com/go/spanner/admin/instance/apiv1/instancepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
)

// Environment variables read by the client libraries and by this package.
const (
	EnvSpannerHost   = "SPANNER_EMULATOR_HOST"
	EnvDatastoreHost = "DATASTORE_EMULATOR_HOST"
	// EnvDatastoreProject is the Datastore project the client libraries
	// default to.
	EnvDatastoreProject = "DATASTORE_PROJECT_ID"
	// EnvSpannerProject and EnvSpannerInstance choose where test databases
	// are created (defaults: DefaultProject, DefaultInstance).
	EnvSpannerProject  = "SPANNER_PROJECT_ID"
	EnvSpannerInstance = "SPANNER_INSTANCE_ID"
	// EnvSkip set to 1 makes tests that need an emulator skip instead of
	// fail when the emulator's variable is unset.
	EnvSkip = "REKEY_SKIP_EMULATOR"
)

// Defaults for test resources.
const (
	DefaultProject  = "rekey-test"
	DefaultInstance = "rekey-test"
	// InstanceConfig is the only instance configuration the Spanner
	// emulator offers.
	InstanceConfig = "emulator-config"
	// MaxRecvMsgSize is the gRPC receive limit DatastoreClient sets: the
	// Datastore emulator returns a whole query result in one response,
	// which passes the client's default 4 MiB for a few tens of thousands
	// of entities.
	MaxRecvMsgSize = 256 << 20
)

// ErrNoEmulator is returned when an emulator's host variable is unset.
var ErrNoEmulator = errors.New("emulator not configured")

// SpannerHost returns SPANNER_EMULATOR_HOST, or an error wrapping
// ErrNoEmulator that says how to start the emulator.
func SpannerHost() (string, error) {
	return host(EnvSpannerHost, "cloud-spanner-emulator")
}

// DatastoreHost returns DATASTORE_EMULATOR_HOST, or an error wrapping
// ErrNoEmulator that says how to start the emulator.
func DatastoreHost() (string, error) {
	return host(EnvDatastoreHost, "cloud-firestore-emulator")
}

func host(env, component string) (string, error) {
	if h := os.Getenv(env); h != "" {
		return h, nil
	}
	return "", fmt.Errorf("%w: %s is not set; run the tests through scripts/test.sh, which starts the emulators from the google-cloud-sdk component %s (set %s=1 to skip emulator tests instead)", ErrNoEmulator, env, component, EnvSkip)
}

// SpannerProject returns SPANNER_PROJECT_ID or DefaultProject.
func SpannerProject() string { return envOr(EnvSpannerProject, DefaultProject) }

// SpannerInstance returns SPANNER_INSTANCE_ID or DefaultInstance.
func SpannerInstance() string { return envOr(EnvSpannerInstance, DefaultInstance) }

// DatastoreProject returns DATASTORE_PROJECT_ID or DefaultProject.
func DatastoreProject() string { return envOr(EnvDatastoreProject, DefaultProject) }

func envOr(env, def string) string {
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// EnsureInstance creates the Spanner instance on the emulator unless it
// exists. Instance ids have at least 2 characters.
func EnsureInstance(ctx context.Context, project, instanceID string) error {
	if _, err := SpannerHost(); err != nil {
		return err
	}
	if len(instanceID) < 2 {
		return fmt.Errorf("spanner instance id %q: needs at least 2 characters", instanceID)
	}
	c, err := instance.NewInstanceAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner instance admin client: %w", err)
	}
	defer c.Close()
	name := fmt.Sprintf("projects/%s/instances/%s", project, instanceID)
	if _, err := c.GetInstance(ctx, &instancepb.GetInstanceRequest{Name: name}); err == nil {
		return nil
	} else if status.Code(err) != codes.NotFound {
		return fmt.Errorf("get spanner instance %s: %w", name, err)
	}
	op, err := c.CreateInstance(ctx, &instancepb.CreateInstanceRequest{
		Parent:     "projects/" + project,
		InstanceId: instanceID,
		Instance: &instancepb.Instance{
			Config:      fmt.Sprintf("projects/%s/instanceConfigs/%s", project, InstanceConfig),
			DisplayName: instanceID,
			NodeCount:   1,
		},
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	// Another test process may have created it meanwhile.
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return fmt.Errorf("create spanner instance %s: %w", name, err)
	}
	return nil
}

// NewSpannerDatabase creates the instance if it is missing and a new
// database dbName in it with the given DDL statements, and returns the
// database path (projects/P/instances/I/databases/D). It fails if the
// database exists. Database ids are 2–30 characters: a lowercase letter,
// then lowercase letters, digits, _ or -, not ending with _ or -.
func NewSpannerDatabase(ctx context.Context, project, instanceID, dbName string, ddl []string) (dbPath string, err error) {
	if err := EnsureInstance(ctx, project, instanceID); err != nil {
		return "", err
	}
	if err := checkDatabaseID(dbName); err != nil {
		return "", err
	}
	c, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return "", fmt.Errorf("spanner database admin client: %w", err)
	}
	defer c.Close()
	op, err := c.CreateDatabase(ctx, &databasepb.CreateDatabaseRequest{
		Parent:          fmt.Sprintf("projects/%s/instances/%s", project, instanceID),
		CreateStatement: "CREATE DATABASE `" + dbName + "`",
		ExtraStatements: ddl,
	})
	if err == nil {
		_, err = op.Wait(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("create spanner database %s: %w", dbName, err)
	}
	return spannerdb.DatabasePath(project, instanceID, dbName), nil
}

// DropSpannerDatabase drops a database created by NewSpannerDatabase.
func DropSpannerDatabase(ctx context.Context, dbPath string) error {
	if _, err := SpannerHost(); err != nil {
		return err
	}
	c, err := database.NewDatabaseAdminClient(ctx)
	if err != nil {
		return fmt.Errorf("spanner database admin client: %w", err)
	}
	defer c.Close()
	if err := c.DropDatabase(ctx, &databasepb.DropDatabaseRequest{Database: dbPath}); err != nil {
		return fmt.Errorf("drop spanner database %s: %w", dbPath, err)
	}
	return nil
}

func checkDatabaseID(id string) error {
	bad := func(why string) error {
		return fmt.Errorf("spanner database id %q: %s (want 2-30 characters: a lowercase letter, then lowercase letters, digits, _ or -, not ending with _ or -)", id, why)
	}
	if len(id) < 2 || len(id) > 30 {
		return bad(fmt.Sprintf("has %d characters", len(id)))
	}
	if id[0] < 'a' || id[0] > 'z' {
		return bad("does not start with a lowercase letter")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return bad(fmt.Sprintf("has %q", c))
		}
	}
	if last := id[len(id)-1]; last == '_' || last == '-' {
		return bad("ends with " + string(last))
	}
	return nil
}

// UniqueDatabaseID returns a fresh valid database id made from hint (e.g. a
// test name): its lowercase letters and digits, at most 20 of them, after a
// leading "t", then "-" and 8 random hex digits; at most 30 characters.
func UniqueDatabaseID(hint string) string {
	var b strings.Builder
	b.WriteByte('t')
	for _, r := range strings.ToLower(hint) {
		if b.Len() > 20 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(rnd[:]))
	return b.String()
}

// DatastoreClient returns a Datastore client for project (empty: the
// DATASTORE_PROJECT_ID variable, else DefaultProject) on the emulator, with
// the gRPC receive limit raised to MaxRecvMsgSize. Extra options are
// appended.
func DatastoreClient(ctx context.Context, project string, opts ...option.ClientOption) (*datastore.Client, error) {
	if _, err := DatastoreHost(); err != nil {
		return nil, err
	}
	if project == "" {
		project = DatastoreProject()
	}
	o := append([]option.ClientOption{
		option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxRecvMsgSize))),
	}, opts...)
	c, err := datastore.NewClient(ctx, project, o...)
	if err != nil {
		return nil, fmt.Errorf("datastore client for %s: %w", project, err)
	}
	return c, nil
}
