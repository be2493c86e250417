package writeorder

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

// Defaults and limits of Options.
const (
	// DefaultShards is the number of shard keys for mid-sized inputs
	// (see ShardKeys): how many workers can plan and write at once.
	DefaultShards = 16
	// DefaultBuffer is how many records a shard sorts at once: 10,000
	// records cut into batches of 500 make batches that each cover 1/20
	// of the key space.
	DefaultBuffer = 10_000
	// DefaultBatchRows matches the sinks' row bound (Spanner's 500 rows,
	// Datastore's 500 entities per commit).
	DefaultBatchRows = 500
	// MaxShards and MaxBuffer bound the knobs: more shard keys than this
	// only add per-element cost; a larger buffer holds too much memory.
	MaxShards = 1 << 16
	MaxBuffer = 1_000_000
	// fill is the share of Buffer a shard is sized to, so that random
	// variation in shard sizes stays within the buffer.
	fill = 0.8
)

// Options configure Writes. They are plain data (JSON) so a DoFn carries
// them to the workers.
type Options struct {
	// Store is the target store: "spanner" or "datastore".
	Store string `json:"store"`
	// Key is the Spanner target table's key schema as text
	// (rewrite.KeySchema.Text, rewrite.ParseKeySchema), used for every
	// record whose table is not in Children. Spanner only.
	Key string `json:"key,omitempty"`
	// Children maps the interleaved child tables (by name, any case) to
	// their key schema text. Spanner only.
	Children map[string]string `json:"children,omitempty"`
	// Shards is the number of random shard keys for mid-sized inputs, more
	// for large ones, fewer for small ones (see ShardKeys; 0:
	// DefaultShards).
	Shards int `json:"shards,omitempty"`
	// Buffer is how many records a shard sorts at once (0: DefaultBuffer).
	// It bounds the memory of a worker: Buffer records and their keys.
	Buffer int `json:"buffer,omitempty"`
	// BatchRows caps the records of a planned batch, one commit (0:
	// DefaultBatchRows). Set it to the sink's row bound.
	BatchRows int `json:"batch_rows,omitempty"`
	// Seed makes the plan reproducible; 0 picks a random seed when the
	// pipeline is built.
	Seed int64 `json:"seed,omitempty"`
	// Local plans each worker's records where they are, without the
	// global shuffle (see Writes): only for records whose new keys are
	// scattered already (rewrite.Info.Scatters). (A ramp-up paces the
	// commits, not the plan: the sinks size and pace each commit as it is
	// sent, see throttle.)
	Local bool `json:"local,omitempty"`
	// Spill is a local directory that every worker of the run can read
	// and write (the workers run in the launching process): the global
	// shuffle's records are kept there, and only references to them go
	// through the runner (see internal/write/spill). Empty: the records go
	// through the runner.
	Spill string `json:"spill,omitempty"`
}

// WithDefaults fills in zero knobs.
func (o Options) WithDefaults() Options {
	if o.Shards == 0 {
		o.Shards = DefaultShards
	}
	if o.Buffer == 0 {
		o.Buffer = DefaultBuffer
	}
	if o.BatchRows == 0 {
		o.BatchRows = DefaultBatchRows
	}
	return o
}

// Validate reports every problem of o (after WithDefaults) at once.
func (o Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf("plan: "+format, args...)) }
	switch o.Store {
	case record.Spanner:
		if strings.TrimSpace(o.Key) == "" {
			add("key: required for a spanner target (the target table's key schema)")
		} else if _, err := rewrite.ParseKeySchema("", o.Key); err != nil {
			add("key: %v", err)
		}
		for name, text := range o.Children {
			if _, err := rewrite.ParseKeySchema(name, text); err != nil {
				add("children[%s]: %v", name, err)
			}
		}
	case record.Datastore:
		if o.Key != "" || len(o.Children) > 0 {
			add("key, children: only for a spanner target")
		}
	default:
		add("store %q: want %s or %s", o.Store, record.Spanner, record.Datastore)
	}
	if o.Shards < 1 || o.Shards > MaxShards {
		add("shards %d: want 1..%d", o.Shards, MaxShards)
	}
	if o.Buffer < 1 || o.Buffer > MaxBuffer {
		add("buffer %d: want 1..%d", o.Buffer, MaxBuffer)
	}
	if o.BatchRows < 1 {
		add("batch_rows %d: want at least 1", o.BatchRows)
	} else if o.Buffer >= 1 && o.BatchRows > o.Buffer {
		add("batch_rows %d: more than the buffer (%d) can sort", o.BatchRows, o.Buffer)
	}
	return errors.Join(errs...)
}

// ShardKeys is the number of shard keys for total records: Shards, but
// no fewer than it takes for every shard to fit its buffer, and, within
// that, no more than lets every shard make 16 batches.
func (o Options) ShardKeys(total int64) int {
	fits := int64(float64(total)/(fill*float64(o.Buffer))) + 1
	narrow := max(total/(16*int64(max(o.BatchRows, 1))), 1)
	return int(min(max(fits, min(int64(o.Shards), narrow)), 1<<31-1))
}
