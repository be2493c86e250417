package migration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/internal/store/datastoredb"
	"github.com/rekeyio/rekey/migration/config"
)

// ReachTimeout bounds how long Reach waits for a store to answer.
const ReachTimeout = 10 * time.Second

// Reach checks that every store the config names (source and target,
// Spanner or Datastore) can be reached: it opens a TCP connection to the
// address the client would use (the emulator's when SPANNER_EMULATOR_HOST
// or DATASTORE_EMULATOR_HOST is set, else the service's), so a wrong
// host or a stopped emulator fails within ReachTimeout with the address
// and the cause ("connection refused", "no such host") instead of a
// client's retries running into a deadline. Credentials are not checked
// here (the first call with them is).
func Reach(ctx context.Context, cfg *config.Config) error {
	var errs []error
	seen := map[string]bool{}
	for _, e := range []struct {
		role string
		ep   config.Endpoint
	}{{"source", cfg.Source}, {"target", cfg.Target}} {
		k := kindOf(e.ep.Type)
		if !k.database {
			continue
		}
		addr, env := k.addr, k.env
		if h := os.Getenv(env); h != "" {
			addr = h
		}
		if seen[addr] {
			continue
		}
		seen[addr] = true
		if err := dial(ctx, addr); err != nil {
			where := addr
			if os.Getenv(env) != "" {
				where = fmt.Sprintf("%s (%s)", addr, env)
			}
			errs = append(errs, fmt.Errorf("%s %s: cannot reach %s: %w", e.role, e.ep.Type, where, err))
		}
	}
	return errors.Join(errs...)
}

func dial(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, ReachTimeout)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			return oe.Err // "connect: connection refused", "lookup x: no such host", "i/o timeout"
		}
		return err
	}
	return c.Close()
}

// Check is what `rekey validate --connect` adds to a config's validation:
// the stores can be reached (Reach), the job resolves against them (the
// Spanner tables exist with keys the rewrite accepts), and a Datastore
// source's kind has entities. It writes nothing.
func Check(ctx context.Context, cfg *config.Config) error {
	if err := Reach(ctx, cfg); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*ReachTimeout)
	defer cancel()
	if _, err := Resolve(ctx, cfg); err != nil {
		return err
	}
	if src := cfg.Source; kindOf(src.Type).datastoreDB() {
		c, err := datastoredb.Client(ctx, src.Project, src.Database)
		if err != nil {
			return err
		}
		defer c.Close()
		keys, err := c.GetAll(ctx, datastore.NewQuery(src.Kind).Namespace(src.Namespace).KeysOnly().Limit(1), nil)
		if err != nil {
			return fmt.Errorf("source: reading kind %s: %w", src.Kind, err)
		}
		if len(keys) == 0 {
			return configErrorf("source.kind: kind %s has no entities in namespace %q", src.Kind, src.Namespace)
		}
	}
	return nil
}
