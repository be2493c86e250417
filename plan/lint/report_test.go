package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rekeyio/rekey/plan/rules"
)

func TestNewReport(t *testing.T) {
	fs := []rules.Finding{
		rules.New(rules.ManyKeyColumns, "T", "4 columns"),         // info
		rules.New(rules.MonotonicKey, "T.Id", "dense"),            // error
		rules.New(rules.SequentialNames, "kind K", "Customer<n>"), // warning
		rules.New(rules.NewestFirstAsc, "T.At", "ascending"),      // info
	}
	sev := func(s rules.Severity) *rules.Severity { return &s }
	for _, tt := range []struct {
		failOn *rules.Severity
		failed bool
	}{{nil, false}, {sev(rules.Info), true}, {sev(rules.Error), true}} {
		r := NewReport([]string{"x"}, fs, tt.failOn)
		if r.Summary.Failed != tt.failed || r.Summary.Worst != "error" {
			t.Errorf("fail-on %v: failed %v, worst %q", tt.failOn, r.Summary.Failed, r.Summary.Worst)
		}
		if r.Findings[0].Rule != rules.MonotonicKey || r.Findings[3].Severity != rules.Info {
			t.Errorf("not sorted: %v", got(r.Findings))
		}
	}
	r := NewReport(nil, fs[:1], sev(rules.Warning))
	if r.Summary.Failed || r.Summary.FailOn != "warning" {
		t.Errorf("an info finding fails --fail-on warning: %+v", r.Summary)
	}
	if want := map[string]int{"error": 0, "warning": 0, "info": 1}; !equalCounts(r.Summary.Findings, want) {
		t.Errorf("counts %v, want %v", r.Summary.Findings, want)
	}
	if fs[0].Rule != rules.ManyKeyColumns {
		t.Error("NewReport sorted the caller's slice")
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestReportOfNothing(t *testing.T) {
	r := NewReport([]string{"DDL file a.sql: 0 tables, 0 indexes"}, nil, nil)
	var text, js bytes.Buffer
	if err := WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if want := "linted DDL file a.sql: 0 tables, 0 indexes\nno findings\n"; text.String() != want {
		t.Errorf("text %q, want %q", text.String(), want)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Findings []rules.Finding `json:"findings"`
		Summary  Summary         `json:"summary"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	// An empty list, not null, for consumers that iterate it.
	if doc.Findings == nil || !strings.Contains(js.String(), `"findings": []`) || doc.Summary.Worst != "" {
		t.Errorf("JSON %s", js.String())
	}
}
