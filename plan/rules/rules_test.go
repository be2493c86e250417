package rules

import (
	"regexp"
	"strings"
	"testing"
)

// A rule's source is what a reader of a lint or plan report can look up:
// public pages, not files of this project's making nor of its history.
func TestSourcesArePublic(t *testing.T) {
	page := regexp.MustCompile(`^(cloud\.google\.com/[a-z0-9/_-]+|Alibaba Cloud Lindorm: .+)( \(.+\))?$`)
	for _, r := range All() {
		if r.Source == "" || r.Rule == "" || r.Fix == "" {
			t.Errorf("rule %s: source %q, rule %q, fix %q: want all three", r.ID, r.Source, r.Rule, r.Fix)
		}
		for _, s := range strings.Split(r.Source, "; ") {
			if !page.MatchString(s) {
				t.Errorf("rule %s cites %q: want a public page (cloud.google.com/…, or a named publication)", r.ID, s)
			}
		}
	}
}

// The timestamp-first fix names the key's own columns, not an example's
// (it said "(LastAccess, UserId) → (UserId, LastAccess)" for a key of
// (EventTime, EventId)).
func TestNewForKeyNamesTheColumns(t *testing.T) {
	f := NewForKey(TimestampFirst, "Events.EventTime", "a timestamp", []string{"EventTime", "EventId"})
	if want := "(EventTime, EventId) → (EventId, EventTime)"; !strings.Contains(f.Fix, want) || strings.Contains(f.Fix, "LastAccess") {
		t.Errorf("fix %q: want it to say %q", f.Fix, want)
	}
	if f := NewForKey(TimestampFirst, "Events.At", "a timestamp", []string{"At"}); !strings.Contains(f.Fix, "(At) → (ShardId, At)") {
		t.Errorf("fix for a one-column key %q", f.Fix)
	}
	if f := NewForKey(MonotonicKey, "Events.Id", "a sequence", []string{"Id"}); f.Fix != Get(MonotonicKey).Fix {
		t.Errorf("fix of %s %q: want the rule's", MonotonicKey, f.Fix)
	}
	for _, r := range All() {
		if strings.Contains(r.Fix, "LastAccess") {
			t.Errorf("rule %s's fix names a sample's column: %q", r.ID, r.Fix)
		}
	}
}
