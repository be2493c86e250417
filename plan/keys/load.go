package keys

import (
	"context"
	"math"
	"slices"
)

// builder adds keys to a set in the order they come.
type builder struct {
	s      *Set
	kinds  map[string]uint8
	fields map[string]uint16
	texts  bool // keep the texts
	seen   bool // a text was seen (prefix holds the first)
}

func newBuilder(texts bool) *builder {
	s := &Set{kinds: slices.Clone(kinds)}
	b := &builder{s: s, kinds: map[string]uint8{}, fields: map[string]uint16{}, texts: texts}
	for i, k := range kinds {
		b.kinds[k] = uint8(i)
	}
	return b
}

func clamp16(v uint64) uint16 { return uint16(min(v, math.MaxUint16)) }

func (b *builder) kind(k string) (uint8, error) {
	if c, ok := b.kinds[k]; ok {
		return c, nil
	}
	if len(b.s.kinds) > math.MaxUint8 {
		return 0, errTooManyKinds
	}
	c := uint8(len(b.s.kinds))
	b.s.kinds = append(b.s.kinds, k)
	b.kinds[k] = c
	return c, nil
}

func (b *builder) part(side int, p *rawPart) error {
	f := &b.s.first[side]
	c, err := b.kind(p.kind)
	if err != nil {
		return err
	}
	t, err := b.s.data.add(p.text)
	if err != nil {
		return err
	}
	f.kind, f.ints, f.text = append(f.kind, c), append(f.ints, p.i), append(f.text, t)
	return nil
}

// prefixOf shortens the shared prefix p to what text shares with it.
func prefixOf(p string, text []byte) string {
	n := 0
	for n < len(p) && n < len(text) && p[n] == text[n] {
		n++
	}
	return p[:n]
}

func (b *builder) add(r *rawKey) error {
	s := b.s
	i := s.n
	o, err := s.data.add(r.old)
	if err != nil {
		return err
	}
	n, err := s.data.add(r.new)
	if err != nil {
		return err
	}
	s.old, s.new = append(s.old, o), append(s.new, n)
	if !b.seen {
		s.prefix, b.seen = [2]string{string(r.oldText), string(r.newText)}, true
	} else {
		s.prefix[0], s.prefix[1] = prefixOf(s.prefix[0], r.oldText), prefixOf(s.prefix[1], r.newText)
	}
	if b.texts {
		for side, t := range [2][]byte{r.oldText, r.newText} {
			sp, err := s.data.add(t)
			if err != nil {
				return err
			}
			s.texts[side] = append(s.texts[side], sp)
		}
	}
	if err := b.part(0, &r.first); err != nil {
		return err
	}
	flags := uint8(0)
	var nf rawPart
	if len(r.newParts) > 0 {
		flags |= flagNewFirst
		nf = r.newParts[0]
	}
	if max(r.newColumns, uint64(len(r.newParts))) > 1 {
		flags |= flagMulti
	}
	if err := b.part(1, &nf); err != nil {
		return err
	}
	cols := r.newColumns
	if cols == 0 {
		cols = uint64(len(r.newParts))
	}
	s.flags = append(s.flags, flags)
	s.columns, s.newCols = append(s.columns, clamp16(r.columns)), append(s.newCols, clamp16(cols))
	s.size = append(s.size, uint32(min(r.bytes, math.MaxUint32)))
	if r.time && s.nsec == nil {
		s.sec, s.nsec, s.timeField = make([]int64, i, max(i, 16)), make([]int32, i, max(i, 16)), make([]uint16, i, max(i, 16))
		for j := range s.nsec {
			s.nsec[j] = -1
		}
	}
	if s.nsec != nil {
		sec, nsec, field := int64(0), int32(-1), uint16(0)
		if r.time {
			sec, nsec = r.sec, int32(r.nsec)
			k, ok := b.fields[r.timeField]
			if !ok {
				if len(s.fieldNames) > math.MaxUint16 {
					return errTooManyFields
				}
				k = uint16(len(s.fieldNames))
				b.fields[r.timeField] = k
				s.fieldNames = append(s.fieldNames, r.timeField)
			}
			field = k
		}
		s.sec, s.nsec, s.timeField = append(s.sec, sec), append(s.nsec, nsec), append(s.timeField, field)
	}
	if r.pos != 0 && s.pos == nil {
		s.pos = make([]int64, i, max(i, 16))
	}
	if s.pos != nil {
		s.pos = append(s.pos, r.pos)
	}
	s.n++
	return nil
}

// permute puts the set's keys in the order perm (perm[i] is the index of
// the ith key), one column at a time.
func (s *Set) permute(perm []int32) {
	s.old, s.new = permuted(s.old, perm), permuted(s.new, perm)
	for side := range s.first {
		f := &s.first[side]
		f.kind, f.ints, f.text = permuted(f.kind, perm), permuted(f.ints, perm), permuted(f.text, perm)
		s.texts[side] = permuted(s.texts[side], perm)
	}
	s.columns, s.newCols, s.flags, s.size = permuted(s.columns, perm), permuted(s.newCols, perm), permuted(s.flags, perm), permuted(s.size, perm)
	s.sec, s.nsec, s.timeField = permuted(s.sec, perm), permuted(s.nsec, perm), permuted(s.timeField, perm)
	s.pos, s.file = permuted(s.pos, perm), permuted(s.file, perm)
}

func permuted[T any](v []T, perm []int32) []T {
	if v == nil {
		return nil
	}
	out := make([]T, len(perm))
	for i, j := range perm {
		out[i] = v[j]
	}
	return out
}

// order is the interleaved order of keys added stream by stream, streams
// of batches of the lengths runs: perm[i] is the index (in the order
// added) of the ith key.
func order(runs [][]int, n int) []int32 {
	starts := make([]int, len(runs))
	k := 0
	for s, r := range runs {
		starts[s] = k
		for _, l := range r {
			k += l
		}
	}
	perm := make([]int32, 0, n)
	interleave(runs, func(s, j int) { perm = append(perm, int32(starts[s]+j)) })
	return perm
}

// FromKeys is a set of keys in memory, in their order, with their texts
// and Files.
func FromKeys(ks []Key) (*Set, error) {
	b := newBuilder(true)
	var r rawKey
	for i := range ks {
		r.fromKey(&ks[i])
		if err := b.add(&r); err != nil {
			return nil, err
		}
	}
	numbers := map[string]int32{}
	for i := range ks {
		if ks[i].File != "" {
			b.s.setFile(i, ks[i].File, numbers)
		}
	}
	return b.s, nil
}

// FromStreams is FromKeys of the streams interleaved.
func FromStreams(streams []Stream) (*Set, error) { return FromKeys(Interleave(streams)) }

func (r *rawKey) fromKey(k *Key) {
	*r = rawKey{newParts: r.newParts[:0], batch: uint64(k.Batch), table: k.Table, old: k.Old, new: k.New,
		oldText: []byte(k.OldText), newText: []byte(k.NewText), first: rawPartOf(&k.First),
		newColumns: uint64(max(k.NewColumns, 0)), columns: uint64(max(k.Columns, 0)), pos: k.Pos, bytes: uint64(max(k.Bytes, 0))}
	for i := range k.NewParts {
		r.newParts = append(r.newParts, rawPartOf(&k.NewParts[i]))
	}
	if k.Time != nil {
		r.time, r.sec, r.nsec, r.timeField = true, k.Time.Unix(), uint64(k.Time.Nanosecond()), k.TimeField
	}
}

func rawPartOf(p *Part) rawPart {
	return rawPart{kind: p.Kind, datastore: p.Datastore, i: p.Int, text: []byte(p.Text), bytes: p.Bytes}
}

// Load reads every part file in dir (local or gs://) into a set,
// interleaved (the streams in the order of their files' names, as Read).
func Load(ctx context.Context, dir string) (*Set, error) {
	fs, names, err := list(ctx, dir)
	if err != nil {
		return nil, err
	}
	defer fs.Close()
	b := newBuilder(false)
	s := b.s
	for _, name := range names {
		first, last, runs := s.n, -1, []int(nil)
		err := scan(ctx, fs, name, func(_ int, r *rawKey) error {
			if int(r.batch) != last || len(runs) == 0 {
				runs = append(runs, 0)
				last = int(r.batch)
			}
			runs[len(runs)-1]++
			return b.add(r)
		})
		if err != nil {
			return nil, err
		}
		if s.n > first {
			s.files = append(s.files, name)
			s.runs = append(s.runs, runs)
		}
	}
	s.permute(order(s.runs, s.n))
	return s, nil
}
