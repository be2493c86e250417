package rewrite

import (
	"crypto/rand"
	"crypto/sha1"
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// DefaultUUIDNamespace is the namespace UUID version 5 uses when none is
// configured. Set your own (any UUID) to keep your keys apart from other
// users' of rekey.
const DefaultUUIDNamespace = "6f1c2a3e-4b5d-5e6f-8a7b-9c0d1e2f3a4b"

// UUID replaces the key with a UUID in its 36-character text form:
//
//	version 5 (default): UUIDv5(namespace, t) = SHA-1 of namespace and t,
//	with the version and variant bits set (RFC 9562). Deterministic: the
//	application's dual-writes and the backfill compute the same new key
//	with no lookup. Safe whenever every writer knows the namespace.
//	version 4: 122 random bits per call. Not deterministic: a re-run gives
//	new keys, so the pipeline must record each old→new mapping and re-runs
//	must read that mapping instead of rewriting again; dual-writing
//	applications cannot compute it. Use it only for one-off loads.
//
// Never version 1: its timestamp sits in the high bits and is monotonic.
// Neither version is invertible (rekey keeps the old key in the row or
// entity for verification). UUID keys spread writes perfectly but lose the
// locality of related rows.
//
// t, the text hashed, is the key's text: for a Spanner key of one STRING or
// BYTES column its bytes, of one INT64 column its decimal digits, otherwise
// the order-preserving encoding of all key columns (AppendSpannerKey, ASC);
// for a Datastore element its text form (see HashPrefix).
//
// Spanner: the new key is one STRING(36) column (Name, default "Id"); with
// Keep the old key columns follow it. Datastore: each chosen element
// becomes the UUID name.
type UUID struct {
	Version   int
	Namespace uuid.UUID
	Name      string
	Keep      bool
	scope     scope
}

func init() {
	register(Info{
		Name: "uuid", Summary: "replace the key with a UUID: v5 (deterministic from a namespace and the old key) or v4 (random)",
		Invertible: false, Deterministic: true, Spanner: true, Datastore: true,
		Params: []ParamDoc{
			{Name: "version", Doc: "5: UUIDv5 of namespace and the key's text, deterministic; 4: random, so a re-run gives new keys (one-off loads only)"},
			{Name: "namespace", Doc: "version 5: the namespace UUID; set your own to keep your keys apart from other users' of rekey"},
			{Name: "name", Doc: "Spanner: the new STRING(36) key column"},
			{Name: "keep", Doc: "Spanner: keep the old key columns after the UUID column"},
			elementsParam,
		},
	}, func(p *paramReader, _ []StepConfig) (Strategy, error) {
		u := &UUID{
			Version: int(p.integer("version", 5, 4, 5)),
			Name:    p.str("name", "Id"),
			Keep:    p.boolean("keep", false),
			scope:   readScope(p, "all"),
		}
		ns := p.str("namespace", DefaultUUIDNamespace)
		var err error
		if u.Namespace, err = uuid.Parse(ns); err != nil {
			p.fail("namespace", "must be a UUID, got %q", ns)
		}
		if u.Name == "" {
			p.fail("name", "must not be empty")
		}
		return u, nil
	})
}

// Info describes the strategy; version 4 is not deterministic.
func (u *UUID) Info() Info {
	i := registry["uuid"].info
	i.Deterministic = u.Version == 5
	return i
}

// Spec returns the canonical spec.
func (u *UUID) Spec() Spec {
	return Spec{Strategy: "uuid", Params: map[string]string{
		"version": strconv.Itoa(u.Version), "namespace": u.Namespace.String(), "name": u.Name,
		"keep": strconv.FormatBool(u.Keep), "elements": string(u.scope),
	}}
}

// AppendUUID appends the 36-character UUID for text t to dst: version 5
// from the namespace, or version 4 from crypto/rand. It does not allocate
// when dst has room and t is short.
func (u *UUID) AppendUUID(dst, t []byte) []byte {
	var id [16]byte
	if u.Version == 4 {
		_, _ = rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40
	} else {
		var buf [256]byte
		b := append(append(buf[:0], u.Namespace[:]...), t...)
		sum := sha1.Sum(b)
		copy(id[:], sum[:16])
		id[6] = id[6]&0x0f | 0x50
	}
	id[8] = id[8]&0x3f | 0x80
	for i, b := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			dst = append(dst, '-')
		}
		dst = append(dst, hexDigits[b>>4], hexDigits[b&0x0f])
	}
	return dst
}

// Spanner binds the strategy to a source key.
func (u *UUID) Spanner(in KeySchema) (*SpannerRewriter, error) {
	if len(in.Columns) == 0 {
		return nil, fmt.Errorf("uuid: table %s has no key columns", in.Table)
	}
	col := Column{Name: u.Name, Type: TypeString, MaxLen: 36}
	out := KeySchema{Table: in.Table, Columns: []Column{col}}
	if u.Keep {
		var err error
		if out, err = prependColumn("uuid", in, col); err != nil {
			return nil, err
		}
	}
	single := len(in.Columns) == 1 && (in.Columns[0].Type == TypeString || in.Columns[0].Type == TypeBytes || in.Columns[0].Type == TypeInt64)
	fwd := func(dst, key []Value) ([]Value, error) {
		var buf [256]byte
		t := buf[:0]
		if single {
			v := key[0]
			if v.Null {
				return dst, &KeyError{Key: FormatSpannerKey(in, key), Rule: "uuid: key column is NULL"}
			}
			switch v.Type {
			case TypeString:
				t = append(t, v.Str...)
			case TypeBytes:
				t = append(t, v.Bytes...)
			default:
				t = strconv.AppendInt(t, v.Int, 10)
			}
		} else {
			t = AppendSpannerKey(t, KeySchema{}, key)
		}
		var ub [36]byte
		dst = append(dst, String(string(u.AppendUUID(ub[:0], t))))
		if u.Keep {
			dst = append(dst, key...)
		}
		return dst, nil
	}
	return &SpannerRewriter{in: in, out: out, fwd: fwd, explain: []string{
		fmt.Sprintf("%s = UUID version %d of the old key (computed by rekey; not expressible in GoogleSQL)", u.Name, u.Version),
	}}, nil
}

// Datastore returns the Datastore form.
func (u *UUID) Datastore() (*DatastoreRewriter, error) {
	fwd := func(k DatastoreKey) (DatastoreKey, error) {
		return mapElements(k, u.scope, func(e PathElement) (PathElement, error) {
			var buf [128]byte
			var ub [36]byte
			return PathElement{Kind: e.Kind, Name: string(u.AppendUUID(ub[:0], appendElementText(buf[:0], e)))}, nil
		})
	}
	return &DatastoreRewriter{fwd: fwd}, nil
}
