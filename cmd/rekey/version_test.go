package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	stamped := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "6834831aa1b2c3d4e5f6"}, {Key: "vcs.time", Value: "2026-12-02T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"linker flag", "v1.2.3", stamped, "v1.2.3"},
		{"go install @version", "", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"a checkout's build", "", stamped, "devel-6834831aa1b2 2026-12-02T10:00:00Z +dirty"},
		{"no VCS stamp", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
		{"no build info", "", nil, "(unknown)"},
	} {
		if got := versionOf(c.linked, c.bi); got != c.want {
			t.Errorf("%s: versionOf = %q, want %q", c.name, got, c.want)
		}
	}
}

// -v is not --version (it is --verbose where a command has one).
func TestVersionNoShorthand(t *testing.T) {
	out, errs, code := rekey(t, "", "-v")
	if code != exitUsage || out != "" || !strings.Contains(errs, "-v") {
		t.Errorf("rekey -v: exit %d, stdout %q, stderr %q; want a usage error naming -v", code, out, errs)
	}
}
