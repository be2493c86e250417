package rewrite

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	farm "github.com/dgryski/go-farm"
)

// Shard prepends a new INT64 key column computed from chosen key columns:
//
//	ShardId = MOD(FARM_FINGERPRINT(t), N)          mode "signed" (default)
//	ShardId = ABS(MOD(FARM_FINGERPRINT(t), N))     mode "abs"
//
// FARM_FINGERPRINT is farmhash Fingerprint64 read as a signed INT64 and MOD
// keeps the sign of the dividend, so "signed" gives -(N-1)..N-1 (2N-1
// values, as in the source documents) and "abs" gives 0..N-1, evenly (ABS
// is applied after MOD, so it can never overflow on INT64's minimum).
//
// t is the text hashed: for one STRING or BYTES column, its bytes; otherwise
// the columns' text forms joined with Sep (default "|"):
//
//	STRING                      the value
//	BYTES                       TO_BASE64(value)
//	INT64, BOOL, DATE, NUMERIC  CAST(value AS STRING)  (e.g. 42, true, 2024-01-31, 1.5)
//	TIMESTAMP                   CAST(UNIX_MICROS(value) AS STRING)
//
// FLOAT64 columns and NULL values are refused (no exact text form).
// Explain prints the GoogleSQL expression, which gives the same value for
// every key and can be declared as a STORED generated column. The original
// key follows the shard column, so Shard is injective and invertible (Invert
// drops the column after checking it).
//
// Choose N near the number of Spanner nodes (e.g. 10 for 10 nodes); N is
// static: changing it needs a schema change and a backfill.
type Shard struct {
	N       int64
	Columns []string // default: every key column
	Name    string   // new column name (default ShardId)
	Mode    string   // "signed" or "abs"
	Sep     string
}

func init() {
	register(Info{
		Name: "shard", Summary: "prepend an INT64 column ShardId = MOD(FARM_FINGERPRINT(columns), N), equal to the printed GoogleSQL expression",
		Invertible: true, Deterministic: true, Spanner: true,
		Params: []ParamDoc{
			{Name: "n", Doc: "number of shards; choose it near the number of Spanner nodes (changing it later needs a backfill)"},
			{Name: "columns", Doc: "the key columns hashed; empty: every key column"},
			{Name: "name", Doc: "name of the new leading INT64 key column"},
			{Name: "mode", Doc: "signed: MOD(FARM_FINGERPRINT(t), n), -(n-1)..n-1; abs: ABS of it, 0..n-1"},
			{Name: "sep", Doc: "the text joining the columns' text forms when several are hashed (no ' or \\)"},
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		s := &Shard{
			N:       p.integer("n", 10, 1, 1<<31),
			Columns: p.list("columns"),
			Name:    p.str("name", "ShardId"),
			Mode:    p.enum("mode", "signed", "signed", "abs"),
			Sep:     p.str("sep", "|"),
		}
		if s.Name == "" {
			p.fail("name", "must not be empty")
		}
		if strings.ContainsAny(s.Sep, "'\\") {
			p.fail("sep", `must not contain ' or \`)
		}
		return s, nil
	})
}

// Info describes the strategy.
func (s *Shard) Info() Info { return registry["shard"].info }

// Spec returns the canonical spec.
func (s *Shard) Spec() Spec {
	return Spec{Strategy: "shard", Params: map[string]string{
		"n": strconv.FormatInt(s.N, 10), "columns": strings.Join(s.Columns, ","), "name": s.Name, "mode": s.Mode, "sep": s.Sep,
	}}
}

// Datastore is not supported: Datastore keys have no columns.
func (s *Shard) Datastore() (*DatastoreRewriter, error) {
	return nil, unsupported("shard", "Datastore", "use hashprefix (a hash prefix on names) for Datastore")
}

// textHasher computes the hashed text of chosen key columns.
type textHasher struct {
	idx   []int
	cols  []Column
	sep   string
	raw   bool // one STRING or BYTES column: hash its bytes
	owner string
}

func newTextHasher(owner string, in KeySchema, names []string, sep string) (*textHasher, error) {
	h := &textHasher{sep: sep, owner: owner}
	if len(names) == 0 {
		for _, c := range in.Columns {
			names = append(names, c.Name)
		}
	}
	for _, n := range names {
		i := in.Index(n)
		if i < 0 {
			return nil, fmt.Errorf("%s: table %s has no key column %q (key: %s)", owner, in.Table, n, in)
		}
		if in.Columns[i].Type == TypeFloat64 {
			return nil, fmt.Errorf("%s: key column %s is FLOAT64, which has no exact text form; choose other columns", owner, n)
		}
		h.idx = append(h.idx, i)
		h.cols = append(h.cols, in.Columns[i])
	}
	if len(h.idx) == 0 {
		return nil, fmt.Errorf("%s: table %s has no key columns", owner, in.Table)
	}
	h.raw = len(h.idx) == 1 && (h.cols[0].Type == TypeString || h.cols[0].Type == TypeBytes)
	return h, nil
}

// appendText appends the hashed text of key to dst.
func (h *textHasher) appendText(dst []byte, key []Value) ([]byte, error) {
	for j, i := range h.idx {
		v := &key[i]
		if v.Null {
			return dst, fmt.Errorf("%s: key column %s is NULL", h.owner, h.cols[j].Name)
		}
		if j > 0 {
			dst = append(dst, h.sep...)
		}
		switch v.Type {
		case TypeString:
			dst = append(dst, v.Str...)
		case TypeBytes:
			if h.raw {
				dst = append(dst, v.Bytes...)
			} else {
				dst = base64.StdEncoding.AppendEncode(dst, v.Bytes)
			}
		case TypeInt64:
			dst = strconv.AppendInt(dst, v.Int, 10)
		case TypeBool:
			dst = strconv.AppendBool(dst, v.Int != 0)
		case TypeDate:
			dst = append(dst, DateString(v.Int)...)
		case TypeNumeric:
			dst = append(dst, v.Str...)
		case TypeTimestamp:
			dst = strconv.AppendInt(dst, v.Time.UnixMicro(), 10)
		}
	}
	return dst, nil
}

// sql renders the same text in GoogleSQL.
func (h *textHasher) sql() string {
	if h.raw {
		return QuoteIdent(h.cols[0].Name)
	}
	parts := make([]string, 0, 2*len(h.cols))
	for j, c := range h.cols {
		if j > 0 {
			parts = append(parts, "'"+h.sep+"'")
		}
		name := QuoteIdent(c.Name)
		switch c.Type {
		case TypeString:
			parts = append(parts, name)
		case TypeBytes:
			parts = append(parts, fmt.Sprintf("TO_BASE64(%s)", name))
		case TypeTimestamp:
			parts = append(parts, fmt.Sprintf("CAST(UNIX_MICROS(%s) AS STRING)", name))
		default:
			parts = append(parts, fmt.Sprintf("CAST(%s AS STRING)", name))
		}
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "CONCAT(" + strings.Join(parts, ", ") + ")"
}

// textBufs holds scratch buffers for hashed texts: farm.Fingerprint64 lets
// its argument escape, so a stack buffer would be a heap allocation per key.
var textBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// fingerprint returns FARM_FINGERPRINT of key's text.
func (h *textHasher) fingerprint(key []Value) (int64, error) {
	if h.raw && !key[h.idx[0]].Null && key[h.idx[0]].Type == TypeString {
		s := key[h.idx[0]].Str
		// Hash the string's bytes in place; Fingerprint64 only reads them.
		return int64(farm.Fingerprint64(unsafe.Slice(unsafe.StringData(s), len(s)))), nil
	}
	bp := textBufs.Get().(*[]byte)
	defer textBufs.Put(bp)
	t, err := h.appendText((*bp)[:0], key)
	*bp = t
	if err != nil {
		return 0, err
	}
	return int64(farm.Fingerprint64(t)), nil
}

// Of returns the shard id of an already-rendered key text t (the text
// described on Shard): ShardOf(FARM_FINGERPRINT(t)). It does not allocate.
func (s *Shard) Of(t []byte) int64 { return s.ShardOf(int64(farm.Fingerprint64(t))) }

// ShardOf computes the shard id from a FARM_FINGERPRINT value.
func (s *Shard) ShardOf(fp int64) int64 {
	m := fp % s.N
	if s.Mode == "abs" && m < 0 {
		m = -m
	}
	return m
}

// SQL returns the GoogleSQL expression for the shard column over schema in.
func (s *Shard) SQL(in KeySchema) (string, error) {
	h, err := newTextHasher("shard", in, s.Columns, s.Sep)
	if err != nil {
		return "", err
	}
	return s.sql(h), nil
}

func (s *Shard) sql(h *textHasher) string {
	e := fmt.Sprintf("MOD(FARM_FINGERPRINT(%s), %d)", h.sql(), s.N)
	if s.Mode == "abs" {
		e = "ABS(" + e + ")"
	}
	return e
}

// Spanner binds the strategy to a source key.
func (s *Shard) Spanner(in KeySchema) (*SpannerRewriter, error) {
	h, err := newTextHasher("shard", in, s.Columns, s.Sep)
	if err != nil {
		return nil, err
	}
	out, err := prependColumn("shard", in, Column{Name: s.Name, Type: TypeInt64})
	if err != nil {
		return nil, err
	}
	fwd := func(dst, key []Value) ([]Value, error) {
		fp, err := h.fingerprint(key)
		if err != nil {
			return dst, &KeyError{Key: FormatSpannerKey(in, key), Rule: err.Error()}
		}
		dst = append(dst, Int64(s.ShardOf(fp)))
		return append(dst, key...), nil
	}
	inv := func(dst, key []Value) ([]Value, error) {
		old := key[1:]
		if err := checkPrefixColumn(out, key, func() (int64, error) {
			fp, err := h.fingerprint(old)
			return s.ShardOf(fp), err
		}); err != nil {
			return dst, err
		}
		return append(dst, old...), nil
	}
	expr := s.sql(h)
	return &SpannerRewriter{in: in, out: out, fwd: fwd, inv: inv, explain: []string{
		fmt.Sprintf("%s = %s", s.Name, expr),
		fmt.Sprintf("DDL: %s INT64 NOT NULL AS (%s) STORED", QuoteIdent(s.Name), expr),
	}}, nil
}

// checkPrefixColumn verifies that the first value of key (of schema out) is
// the one want computes from the rest; used by inverses of strategies that
// prepend a computed column.
func checkPrefixColumn(out KeySchema, key []Value, want func() (int64, error)) error {
	if key[0].Null {
		return &KeyError{Key: FormatSpannerKey(out, key), Rule: fmt.Sprintf("column %s is NULL", out.Columns[0].Name)}
	}
	w, err := want()
	if err != nil {
		return &KeyError{Key: FormatSpannerKey(out, key), Rule: err.Error()}
	}
	if key[0].Int != w {
		return &KeyError{Key: FormatSpannerKey(out, key), Rule: fmt.Sprintf("column %s is %d, but the rest of the key gives %d", out.Columns[0].Name, key[0].Int, w)}
	}
	return nil
}
