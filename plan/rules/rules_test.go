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
