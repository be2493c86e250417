package progress

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	s := Snapshot{Read: 2300, Done: 2200, Dead: 50, Elapsed: 5 * time.Second}
	for _, c := range []struct {
		name  string
		total *Total
		want  string
	}{
		{"no total", nil, "rekey: 2300 read, 2200 written, 50 dead-lettered, 450 records/s, 5s elapsed"},
		{"estimated", &Total{N: 5000, From: "file sizes"}, "rekey: 45% (2250 of ~5000 records, from file sizes), 2300 read, 2200 written, 50 dead-lettered, 450 records/s, ETA 6s, 5s elapsed"},
		{"exact", &Total{N: 4500, Exact: true, From: "COUNT(*)"}, "rekey: 50% (2250 of 4500 records, from COUNT(*)), 2300 read, 2200 written, 50 dead-lettered, 450 records/s, ETA 5s, 5s elapsed"},
	} {
		if got := Line(s, c.total); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
	del := Line(Snapshot{Read: 10, Done: 10, Verb: "deleted", Elapsed: time.Second}, nil)
	if !strings.Contains(del, "10 deleted") {
		t.Errorf("a cleanup's line %q does not say deleted", del)
	}
}

func TestETA(t *testing.T) {
	if _, ok := ETA(Snapshot{Read: 10, Elapsed: time.Second}, Total{N: 100}); ok {
		t.Error("an ETA before any record finished")
	}
	if eta, ok := ETA(Snapshot{Done: 25, Elapsed: 10 * time.Second}, Total{N: 100}); !ok || eta != 30*time.Second {
		t.Errorf("ETA %v %v, want 30s", eta, ok)
	}
	if eta, _ := ETA(Snapshot{Done: 120, Elapsed: 10 * time.Second}, Total{N: 100}); eta != 0 {
		t.Errorf("ETA past the total %v, want 0", eta)
	}
}

// TestPlainMeter: lines at the interval, the first at once, no control
// characters; an estimated total the run outgrows is raised (never past
// 100%).
func TestPlainMeter(t *testing.T) {
	var b bytes.Buffer
	m := New(&b, false, 10*time.Second)
	m.SetTotal(Total{N: 100, From: "file sizes"})
	for sec := 1; sec <= 25; sec++ {
		m.Update(Snapshot{Read: int64(sec * 6), Done: int64(sec * 5), Elapsed: time.Duration(sec) * time.Second})
	}
	m.Finish()
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3 (at 1s, 11s, 21s):\n%s", len(lines), b.String())
	}
	if strings.ContainsAny(b.String(), "\r\033") {
		t.Errorf("plain output has control characters: %q", b.String())
	}
	if !strings.HasPrefix(lines[0], "rekey: 5% (5 of ~100 records") || !strings.HasPrefix(lines[2], "rekey: 100% (105 of ~105 records") {
		t.Errorf("lines:\n%s", b.String())
	}
}

// TestBarMeter: on a terminal the bar shows percent done and becomes a
// bar when the total arrives after the start.
func TestBarMeter(t *testing.T) {
	var b bytes.Buffer
	m := New(&b, true, 0)
	m.Update(Snapshot{Read: 10, Done: 5, Elapsed: time.Second})
	m.SetTotal(Total{N: 20, Exact: true, From: "COUNT(*)"})
	m.Update(Snapshot{Read: 20, Done: 10, Elapsed: 2 * time.Second})
	out := b.String()
	m.Finish()
	if !strings.Contains(out, "50%") || !strings.Contains(out, "10/20") || !strings.Contains(out, "20 read") {
		t.Errorf("bar output %q lacks 50%%, 10/20 and the read count", out)
	}
}
