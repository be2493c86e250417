// Package configs holds rekey's example configs and the sample data the
// demo loads: samples/user_access_logs.jsonl (a UserAccessLogs table keyed
// by its LastAccess timestamp, written in time order) and
// samples/customers.jsonl (a Datastore Customer kind named Customer1,
// Customer2, … with Order children).
package configs

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	"github.com/rekeyio/rekey/record"
)

// Samples is the bundled sample data.
//
//go:embed samples/*.jsonl
var Samples embed.FS

// SampleRecords reads the bundled sample name (e.g.
// "samples/customers.jsonl") as records.
func SampleRecords(name string) ([]record.Record, error) {
	data, err := fs.ReadFile(Samples, name)
	if err != nil {
		return nil, err
	}
	return ParseRecords(name, data)
}

// ParseRecords parses JSON Lines text as records (empty lines skipped);
// name, the file's, prefixes the error of a line that is not a record.
func ParseRecords(name string, data []byte) ([]record.Record, error) {
	var out []record.Record
	for i, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		r, err := record.ParseJSON([]byte(line))
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}
