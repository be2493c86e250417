// Package configs holds rekey's example configs and the sample data the
// demo loads: samples/user_access_logs.jsonl (a UserAccessLogs table keyed
// by its LastAccess timestamp, written in time order) and
// samples/customers.jsonl (a Datastore Customer kind named Customer1,
// Customer2, … with Order children).
package configs

import "embed"

// Samples is the bundled sample data.
//
//go:embed samples/*.jsonl
var Samples embed.FS
