package lint

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/plan/detect"
	"github.com/rekeyio/rekey/plan/rules"
	"github.com/rekeyio/rekey/rewrite"
)

// Limits of the Spanner checks.
const (
	// MaxKeyColumns is the most key columns of its own a table should
	// have (Lindorm's primary-key design: 1–3).
	MaxKeyColumns = 3
	// MaxKeyBytes is the longest a key's variable-length part should be
	// (Lindorm's primary-key design: ≤ 2 KB).
	MaxKeyBytes = 2048
	// ShardsPerNode is how many shards per node count as far above the
	// node count.
	ShardsPerNode = 4
)

// SpannerOptions are what the Spanner checks know beyond the DDL.
type SpannerOptions struct {
	// Nodes is the node count the database has or will have; 0 (unknown)
	// skips the shard-count check.
	Nodes int
	// Shards are shard counts known from a migration config: the config's
	// target table (any case) → its shard column and N.
	Shards map[string]Shards
}

// Shards is a shard column and its count N.
type Shards struct {
	Column string
	N      int64
	// From says where N comes from, for the evidence.
	From string
}

// Spanner checks a schema's tables and indexes against the rules of key
// design that a schema shows (see the package comment). The findings are
// sorted (rules.Sort).
func Spanner(s *spannerdb.Schema, o SpannerOptions) []rules.Finding {
	var fs []rules.Finding
	for _, name := range tableNames(s) {
		t := s.Tables[name]
		fs = append(fs, checkTable(s, t, o)...)
	}
	for _, ix := range s.Indexes {
		fs = append(fs, checkIndex(s, ix)...)
	}
	rules.Sort(fs)
	return fs
}

func tableNames(s *spannerdb.Schema) []string {
	names := make([]string, 0, len(s.Tables))
	for n := range s.Tables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parentOf is t's parent in s, nil for a root table or a parent the DDL
// does not have.
func parentOf(s *spannerdb.Schema, t *spannerdb.Table) *spannerdb.Table {
	if t.Parent == "" {
		return nil
	}
	return s.Tables[strings.ToLower(t.Parent)]
}

func checkTable(s *spannerdb.Schema, t *spannerdb.Table, o SpannerOptions) []rules.Finding {
	var fs []rules.Finding
	parent := parentOf(s, t)
	own := t.Key.Columns
	if parent != nil && len(parent.Key.Columns) <= len(own) {
		own = own[len(parent.Key.Columns):]
	}
	// An interleaved child's first key column is its parent's, checked
	// there.
	if parent == nil && len(t.Key.Columns) > 0 {
		fs = append(fs, checkFirstKeyColumn(t)...)
	}
	for _, kc := range own {
		c := t.Column(kc.Name)
		subject := t.Name + "." + kc.Name
		if kc.Type == rewrite.TypeTimestamp && !kc.Desc {
			fs = append(fs, rules.New(rules.NewestFirstAsc, subject, fmt.Sprintf(
				"key column %s TIMESTAMP is ascending; lint cannot see the reads: this matters only if they read it newest first", kc.Name)))
		}
		if c != nil && namesUUIDv1(c.Name) {
			fs = append(fs, rules.New(rules.UUIDv1, subject, fmt.Sprintf(
				"key column %s %s: its name says it holds time-based (version 1) UUIDs", c.Name, c.Type)))
		}
	}
	if len(own) > MaxKeyColumns {
		fs = append(fs, rules.New(rules.ManyKeyColumns, t.Name, manyColumnsEvidence(t, parent, len(own))))
	}
	fs = append(fs, checkKeyLength(t, parent)...)
	if f, ok := checkShards(s, t, o); ok {
		fs = append(fs, f)
	}
	return fs
}

func manyColumnsEvidence(t, parent *spannerdb.Table, own int) string {
	ev := fmt.Sprintf("%s: %d columns", t.Key, len(t.Key.Columns))
	if parent != nil {
		ev += fmt.Sprintf(", %d of them its own (the rest are %s's)", own, parent.Name)
	}
	return ev
}

// monotonic says why column c (of type typ) of table t holds monotonic
// values, as the DDL shows it: rule is TimestampFirst for a time, and
// MonotonicKey for a number or string whose name reads as one; "" when
// the DDL gives no reason. Columns whose values Spanner spreads (a
// FARM_FINGERPRINT shard, GENERATE_UUID(), a sequence or identity
// column, all of whose values are bit-reversed in Spanner) are not.
func monotonic(c *spannerdb.Column) (rule, why string) {
	if spread(c) {
		return "", ""
	}
	base := baseType(c.Type)
	switch {
	case base == "TIMESTAMP" || base == "DATE":
		why = fmt.Sprintf("%s is %s", c.Name, base)
		if c.AllowCommitTimestamp {
			why += " with allow_commit_timestamp (commit timestamps only grow)"
		} else if strings.Contains(strings.ToUpper(c.Default), "CURRENT_TIMESTAMP") {
			why += " DEFAULT (CURRENT_TIMESTAMP())"
		}
		return rules.TimestampFirst, why
	case (base == "INT64" || base == "STRING") && detect.LooksMonotonicName(c.Name):
		return rules.MonotonicKey, fmt.Sprintf("%s %s is named like a time or a sequence number (lint reads only the schema; `rekey plan` measures the values)", c.Name, c.Type)
	}
	return "", ""
}

// spread reports whether Spanner computes c's values spread over the key
// space.
func spread(c *spannerdb.Column) bool {
	u := strings.ToUpper(c.Expression + " " + c.Default)
	return strings.Contains(u, "FARM_FINGERPRINT") || strings.Contains(u, "GENERATE_UUID") ||
		strings.Contains(u, "GET_NEXT_SEQUENCE_VALUE") || strings.Contains(u, "BIT_REVERSE") ||
		strings.Contains(u, "BIT_REVERSED_POSITIVE")
}

func baseType(typ string) string {
	if i := strings.IndexByte(typ, '('); i >= 0 {
		typ = typ[:i]
	}
	return strings.ToUpper(strings.TrimSpace(typ))
}

func checkFirstKeyColumn(t *spannerdb.Table) []rules.Finding {
	first := t.Key.Columns[0]
	c := t.Column(first.Name)
	if c == nil {
		return nil
	}
	rule, why := monotonic(c)
	if rule == "" {
		return nil
	}
	var columns []string
	for _, kc := range t.Key.Columns {
		columns = append(columns, kc.Name)
	}
	return []rules.Finding{rules.NewForKey(rule, t.Name+"."+c.Name, fmt.Sprintf("first key column of %s %s: %s", t.Name, t.Key, why), columns)}
}

func checkIndex(s *spannerdb.Schema, ix spannerdb.Index) []rules.Finding {
	if ix.Interleave != "" {
		return nil
	}
	lead := ix.Columns[0].Name
	var why string
	if c := indexedColumn(s, ix.Table, lead); c != nil {
		_, why = monotonic(c)
	} else if detect.LooksMonotonicName(lead) {
		why = fmt.Sprintf("%s is named like a time or a sequence number (the DDL does not declare the column)", lead)
	}
	if why == "" {
		return nil
	}
	return []rules.Finding{rules.New(rules.MonotonicIndex, "INDEX "+ix.Name, fmt.Sprintf(
		"index %s on %s is not interleaved and its first column %s", ix.Name, ix.Table, why))}
}

// indexedColumn is the column of table in s, nil if the DDL does not have
// it.
func indexedColumn(s *spannerdb.Schema, table, column string) *spannerdb.Column {
	if t := s.Tables[strings.ToLower(table)]; t != nil {
		return t.Column(column)
	}
	return nil
}

// namesUUIDv1 reports whether a column's name says it holds version 1
// UUIDs: uuid_v1, UuidV1, v1_uuid, TimeUuid (Cassandra's name for them).
func namesUUIDv1(name string) bool {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	return strings.Contains(n, "uuidv1") || strings.Contains(n, "v1uuid") || strings.Contains(n, "timeuuid")
}

// keyLength is the declared length of a key's STRING(n) and BYTES(n)
// columns (n characters count as n bytes: at least that), and the columns
// declared MAX.
func keyLength(cols []rewrite.Column) (bytes int, unbounded []string) {
	for _, c := range cols {
		if c.Type != rewrite.TypeString && c.Type != rewrite.TypeBytes {
			continue
		}
		if c.MaxLen == 0 {
			unbounded = append(unbounded, c.Name)
		}
		bytes += c.MaxLen
	}
	return bytes, unbounded
}

// checkKeyLength reports a key longer than MaxKeyBytes at the table whose
// own columns make it so, and every STRING(MAX)/BYTES(MAX) key column at
// the table that declares it (as info: its values may well be short).
func checkKeyLength(t, parent *spannerdb.Table) []rules.Finding {
	var fs []rules.Finding
	n, unbounded := keyLength(t.Key.Columns)
	parentN, parentUnbounded := 0, 0
	if parent != nil {
		var u []string
		parentN, u = keyLength(parent.Key.Columns)
		parentUnbounded = len(u)
	}
	if n > MaxKeyBytes && parentN <= MaxKeyBytes {
		fs = append(fs, rules.New(rules.LongKey, t.Name, fmt.Sprintf(
			"%s: its STRING and BYTES columns are declared up to %s bytes (STRING(n) counted as n bytes), over %s",
			t.Key, detect.Thousands(int64(n)), detect.Thousands(MaxKeyBytes))))
	}
	for _, name := range unbounded[min(parentUnbounded, len(unbounded)):] {
		f := rules.New(rules.LongKey, t.Name+"."+name, fmt.Sprintf(
			"key column %s is %s: its values are not bounded; lint cannot see how long they are", name, t.Column(name).Type))
		f.Severity = rules.Info
		fs = append(fs, f)
	}
	return fs
}

// modFingerprint matches the divisor after FARM_FINGERPRINT(...) in
// MOD(FARM_FINGERPRINT(...), N).
var modFingerprint = regexp.MustCompile(`^\s*,\s*(\d+)\s*\)`)

// generatedShards returns N of a column AS ([ABS(]MOD(FARM_FINGERPRINT(...), N)[)]).
func generatedShards(expr string) (int64, bool) {
	u := strings.ToUpper(expr)
	at := strings.Index(u, "FARM_FINGERPRINT")
	if at < 0 || !strings.Contains(u[:at], "MOD") {
		return 0, false
	}
	open := strings.IndexByte(u[at:], '(')
	if open < 0 {
		return 0, false
	}
	end := closing(u, at+open)
	if end < 0 {
		return 0, false
	}
	m := modFingerprint.FindStringSubmatch(u[end+1:])
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	return n, err == nil
}

// closing is the index of the parenthesis closing the one at open, or -1.
func closing(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// checkShardBounds match the CHECK forms that bound a shard column:
// c < N, c <= M, c BETWEEN L AND M.
var (
	checkBelow   = `(?i)\b%s\s*<\s*(\d+)`
	checkAtMost  = `(?i)\b%s\s*<=\s*(\d+)`
	checkBetween = `(?i)\b%s\s+BETWEEN\s+-?\d+\s+AND\s+(\d+)`
)

// checkedShards returns the shard count a CHECK constraint gives column
// c: N of c < N, M+1 of c <= M or of c BETWEEN L AND M.
func checkedShards(checks []string, column string) (int64, string, bool) {
	q := regexp.QuoteMeta(column)
	for _, chk := range checks {
		for i, form := range []string{checkAtMost, checkBelow, checkBetween} {
			m := regexp.MustCompile(fmt.Sprintf(form, q)).FindStringSubmatch(chk)
			if m == nil {
				continue
			}
			n, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil {
				continue
			}
			if i != 1 {
				n++
			}
			return n, "CHECK (" + chk + ")", true
		}
	}
	return 0, "", false
}

// shardColumn finds t's shard column and count: its first key column
// computed AS (MOD(FARM_FINGERPRINT(...), N)) STORED, or named like
// ShardId and bounded by a CHECK, or the count a migration config gives.
func shardColumn(s *spannerdb.Schema, t *spannerdb.Table, o SpannerOptions) (Shards, bool) {
	for name, sh := range o.Shards {
		if strings.EqualFold(name, t.Name) {
			return sh, true
		}
	}
	if len(t.Key.Columns) == 0 {
		return Shards{}, false
	}
	c := t.Column(t.Key.Columns[0].Name)
	if c == nil || baseType(c.Type) != "INT64" {
		return Shards{}, false
	}
	if n, ok := generatedShards(c.Expression); ok && c.Generated {
		return Shards{Column: c.Name, N: n, From: "AS (" + c.Expression + ")"}, true
	}
	if strings.Contains(strings.ToLower(c.Name), "shard") {
		if n, from, ok := checkedShards(s.Checks[strings.ToLower(t.Name)], c.Name); ok {
			return Shards{Column: c.Name, N: n, From: from}, true
		}
	}
	return Shards{}, false
}

func checkShards(s *spannerdb.Schema, t *spannerdb.Table, o SpannerOptions) (rules.Finding, bool) {
	sh, ok := shardColumn(s, t, o)
	if !ok {
		return rules.Finding{}, false
	}
	return ShardFinding(t.Name, sh, o.Nodes)
}

// ShardFinding is the shards-far-above-nodes finding for table's shard
// column, if its count is more than ShardsPerNode times nodes (nodes ≤ 0:
// unknown, never). Spanner calls it for the tables of the DDL; a caller
// that knows a shard count for a table the DDL does not have (a target
// not created yet) calls it itself.
func ShardFinding(table string, sh Shards, nodes int) (rules.Finding, bool) {
	if nodes <= 0 || sh.N <= int64(ShardsPerNode*nodes) {
		return rules.Finding{}, false
	}
	return rules.New(rules.ShardsAboveNodes, table+"."+sh.Column, fmt.Sprintf(
		"%s shards (%s) for %s nodes (--nodes), more than %d per node",
		detect.Thousands(sh.N), sh.From, detect.Thousands(int64(nodes)), ShardsPerNode)), true
}
