package keys

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"unsafe"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/filesystem"
)

// Set is the sampled keys, interleaved (Interleave), held as compactly as
// the analysis allows: for each key its old and new encodings, the first
// part of each side (Kind, Int and Text; not Bytes or Datastore), the
// numbers of key columns, the record's size, Time and TimeField, Pos and
// File, in columns of numbers and one arena of bytes. A Set read from
// files (Load) holds no key texts: Texts reads the few it is asked for
// back from the files, and TextPrefix says what all of them share.
type Set struct {
	n        int
	data     arena
	old, new []span
	first    [2]parts // the old key's First, the new key's first part
	columns  []uint16 // Key.Columns
	newCols  []uint16 // Key.NewColumns, or if 0 the number of NewParts
	flags    []uint8
	size     []uint32 // Key.Bytes
	// Times: sec and nsec (-1: none) and the field's name by its number.
	sec        []int64
	nsec       []int32
	timeField  []uint16
	fieldNames []string
	// pos is nil when no key has a Pos; file (nil when no key has a
	// File) numbers fileNames, -1 for none.
	pos       []int64
	file      []int32
	fileNames []string
	// texts are the keys' texts (sets made in memory), else nil.
	texts  [2][]span
	prefix [2]string
	// kinds are the kinds of parts by their number in parts.kind: those
	// of the file format, then any others.
	kinds []string
	// files and runs (the lengths of their runs of batches) are where a
	// set read from files came from.
	files []string
	runs  [][]int
	err   error
}

// Key flags.
const (
	flagNewFirst = 1 << iota // the key has NewParts
	flagMulti                // max(NewColumns, len(NewParts)) > 1
)

// parts are the first parts of one side.
type parts struct {
	kind []uint8 // index into kindNames; 0 is ""
	ints []int64
	text []span
}

// span is a value in an arena: block (16 bits), offset (24) and length
// (24).
type span uint64

const blockBits = 24

// arena holds byte values in blocks of 16 MB, none of which ever grows
// past its first allocation (no copying as the arena grows).
type arena struct{ blocks [][]byte }

func (a *arena) add(b []byte) (span, error) {
	if len(b) >= 1<<blockBits {
		return 0, fmt.Errorf("a value of %d bytes (at most %d)", len(b), 1<<blockBits-1)
	}
	last := len(a.blocks) - 1
	if last < 0 || len(a.blocks[last])+len(b) > 1<<blockBits {
		if len(a.blocks) == 1<<16 {
			return 0, errors.New("more than 1 TiB of keys")
		}
		a.blocks = append(a.blocks, make([]byte, 0, 1<<blockBits))
		last++
	}
	off := len(a.blocks[last])
	a.blocks[last] = append(a.blocks[last], b...)
	return span(uint64(last)<<48 | uint64(off)<<blockBits | uint64(len(b))), nil
}

func (a *arena) get(s span) []byte {
	n := int(s & (1<<blockBits - 1))
	if n == 0 {
		return nil
	}
	off := int(s>>blockBits) & (1<<blockBits - 1)
	return a.blocks[s>>48][off : off+n : off+n]
}

// str is the value as a string sharing the arena's bytes (which never
// change once added).
func (a *arena) str(s span) string {
	b := a.get(s)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Len is the number of keys.
func (s *Set) Len() int { return s.n }

// Old and New are key i's encodings.
func (s *Set) Old(i int) []byte { return s.data.get(s.old[i]) }
func (s *Set) New(i int) []byte { return s.data.get(s.new[i]) }

// Key is key i's old (old) or new encoding.
func (s *Set) Key(old bool, i int) []byte {
	if old {
		return s.Old(i)
	}
	return s.New(i)
}

// First is the first part of key i's old key (its First; ok unless its
// Kind is "") or of its new key (its first NewPart; ok if it has one),
// its Kind, Int and Text.
func (s *Set) First(old bool, i int) (p Part, ok bool) {
	side := 1
	if old {
		side = 0
	} else if s.flags[i]&flagNewFirst == 0 {
		return Part{}, false
	}
	f := &s.first[side]
	p = Part{Kind: s.kinds[f.kind[i]], Int: f.ints[i], Text: s.data.str(f.text[i])}
	return p, !old || p.Kind != ""
}

// Columns is key i's Columns; NewColumns its NewColumns, or the number
// of its NewParts if that is 0; Multi whether either is more than 1.
func (s *Set) Columns(i int) int    { return int(s.columns[i]) }
func (s *Set) NewColumns(i int) int { return int(s.newCols[i]) }
func (s *Set) Multi(i int) bool     { return s.flags[i]&flagMulti != 0 }

// Bytes is key i's record's size.
func (s *Set) Bytes(i int) int { return int(s.size[i]) }

// Time is key i's Time as Unix seconds and nanoseconds (ok false: none)
// and TimeField.
func (s *Set) Time(i int) (sec int64, nsec int32, field string, ok bool) {
	if s.nsec == nil || s.nsec[i] < 0 {
		return 0, 0, "", false
	}
	return s.sec[i], s.nsec[i], s.fieldNames[s.timeField[i]], true
}

// Timed reports whether any key has a Time.
func (s *Set) Timed() bool { return s.nsec != nil }

// Pos and File are key i's.
func (s *Set) Pos(i int) int64 {
	if s.pos == nil {
		return 0
	}
	return s.pos[i]
}

func (s *Set) File(i int) string {
	if s.file == nil || s.file[i] < 0 {
		return ""
	}
	return s.fileNames[s.file[i]]
}

// NameFiles sets the File of every key with a Pos to name(Pos).
func (s *Set) NameFiles(name func(pos int64) (string, error)) error {
	if s.pos == nil {
		return nil
	}
	numbers := map[string]int32{}
	for i, f := range s.fileNames {
		numbers[f] = int32(i)
	}
	for i, p := range s.pos {
		if p == 0 {
			continue
		}
		f, err := name(p)
		if err != nil {
			return err
		}
		s.setFile(i, f, numbers)
	}
	return nil
}

func (s *Set) setFile(i int, f string, numbers map[string]int32) {
	if f == "" {
		if s.file != nil {
			s.file[i] = -1
		}
		return
	}
	if s.file == nil {
		s.file = make([]int32, s.n)
		for j := range s.file {
			s.file[j] = -1
		}
	}
	k, ok := numbers[f]
	if !ok {
		k = int32(len(s.fileNames))
		numbers[f] = k
		s.fileNames = append(s.fileNames, f)
	}
	s.file[i] = k
}

// TextPrefix is the longest prefix all old (old) or new texts share.
func (s *Set) TextPrefix(old bool) string {
	if old {
		return s.prefix[0]
	}
	return s.prefix[1]
}

// Texts returns the old and new texts of the keys idx. A set read from
// files reads them back from the files: all of them in one pass.
func (s *Set) Texts(ctx context.Context, idx []int) (old, new []string, err error) {
	old, new = make([]string, len(idx)), make([]string, len(idx))
	if s.texts[0] != nil || len(idx) == 0 {
		for j, i := range idx {
			old[j], new[j] = s.data.str(s.texts[0][i]), s.data.str(s.texts[1][i])
		}
		return old, new, nil
	}
	// Each wanted key's file and place in it.
	type want struct{ file, index, j int }
	at := make(map[int][]int, len(idx)) // key → positions in idx
	for j, i := range idx {
		at[i] = append(at[i], j)
	}
	var wants []want
	k := 0
	interleave(s.runs, func(f, index int) {
		if js, ok := at[k]; ok {
			for _, j := range js {
				wants = append(wants, want{f, index, j})
			}
		}
		k++
	})
	sort.Slice(wants, func(a, b int) bool {
		if wants[a].file != wants[b].file {
			return wants[a].file < wants[b].file
		}
		return wants[a].index < wants[b].index
	})
	fs, err := filesystem.New(ctx, s.files[0])
	if err != nil {
		return nil, nil, err
	}
	defer fs.Close()
	for len(wants) > 0 {
		f := wants[0].file
		r, c, err := open(ctx, fs, s.files[f])
		if err != nil {
			return nil, nil, err
		}
		for pos := 0; len(wants) > 0 && wants[0].file == f; pos++ {
			if pos < wants[0].index {
				if err := r.skip(); err != nil {
					c.Close()
					return nil, nil, err
				}
				continue
			}
			b, err := r.next()
			var ot, nt []byte
			if err == nil {
				if ot, nt, err = decodeTexts(b); err != nil {
					err = r.fail(err)
				}
			}
			if err != nil {
				c.Close()
				return nil, nil, err
			}
			for len(wants) > 0 && wants[0].file == f && wants[0].index == pos {
				old[wants[0].j], new[wants[0].j] = string(ot), string(nt)
				wants = wants[1:]
			}
		}
		c.Close()
	}
	return old, new, nil
}

// Text is the old (old) or new text of key i ("" if it cannot be read:
// Err says why).
func (s *Set) Text(old bool, i int) string {
	o, n, err := s.Texts(context.Background(), []int{i})
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return ""
	}
	if old {
		return o[0]
	}
	return n[0]
}

// Err is the first error of Text.
func (s *Set) Err() error { return s.err }

var (
	errTooManyKinds  = errors.New("more than 255 kinds of key parts")
	errTooManyFields = errors.New("more than 65,535 names of time fields")
)
