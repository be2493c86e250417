package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/viper"

	"github.com/rekeyio/rekey/internal/suggest"
)

// NonConfigEnv are the REKEY_* environment variables rekey and its tests
// read that are not config keys; Load does not report them. Add a variable
// here when code starts reading one.
var NonConfigEnv = map[string]string{
	"REKEY_JOB_ENDPOINT":    "host:port of a running Beam job server for the universal runner (tests, scripts/test.sh)",
	"REKEY_WORKER_POOL":     "host:port of a Go SDK worker pool beside that job server (tests, scripts/test.sh)",
	"REKEY_WORKER_POOL_DIR": "the folder under which that worker pool gives each worker its own (tests, scripts/test.sh)",
	"REKEY_WORKER_POOL_BIN": "the worker pool's program, for tests that start a pool of their own (internal/testkit/beamtest, scripts/test.sh)",
	"REKEY_WORKER_BOOT":     "Beam's Go SDK boot program those pools run (internal/testkit/beamtest, scripts/test.sh)",
	"REKEY_SKIP_EMULATOR":   "skip the tests that need the Spanner and Datastore emulators (internal/store/emulator)",
	"REKEY_CHART_LOOK":      "a folder where the chart tests keep the images they draw, for a look (plan/chart)",
	"REKEY_FAKE_EMULATOR":   "makes internal/store/emulator's test binary act as a fake emulator process (its tests set it)",
}

// EnvName is the environment variable that overrides the key at path:
// REKEY_ followed by the path in upper case with "." replaced by "_",
// e.g. REKEY_WRITE_BATCH_ROWS for write.batch_rows.
func EnvName(path string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// envKeys maps the environment variables that override a key of v to the
// key: every key of Config that holds a value, and the rewrite parameters
// the file names (viper's environment reaches only keys it knows).
func envKeys(v *viper.Viper) map[string]string {
	out := map[string]string{}
	for _, k := range leafKeys(reflect.TypeFor[Config](), "") {
		out[EnvName(k)] = k
	}
	for _, k := range v.AllKeys() {
		if strings.HasPrefix(k, "rewrite.params.") {
			out[EnvName(k)] = k
		}
	}
	return out
}

// envProblems reports the set REKEY_* variables of environ ("NAME=value"
// entries, as os.Environ gives them) that override no key of v: a typo
// would otherwise be ignored without a word. Empty variables are skipped,
// as viper skips them.
func envProblems(v *viper.Viper, environ []string) []error {
	known := envKeys(v)
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []error
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") || value == "" {
			continue
		}
		if _, ok := known[name]; ok {
			continue
		}
		if _, ok := NonConfigEnv[name]; ok {
			continue
		}
		out = append(out, &FieldError{Msg: envMessage(name, names, known)})
	}
	slices.SortFunc(out, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return out
}

func envMessage(name string, names []string, known map[string]string) string {
	msg := fmt.Sprintf("environment variable %s names no config key", name)
	if strings.HasPrefix(name, EnvPrefix+"_REWRITE_PARAMS_") {
		param := strings.ToLower(strings.TrimPrefix(name, EnvPrefix+"_REWRITE_PARAMS_"))
		return msg + fmt.Sprintf(": the environment overrides only the rewrite parameters the file names; add rewrite.params.%s to the file", param)
	}
	if s := suggest.Closest(name, names); s != "" {
		msg += fmt.Sprintf(" (did you mean %s (%s)?)", known[s], s)
	}
	return msg
}

// envValue is the value of the variable overriding path, as viper reads it
// (an empty variable is unset).
func envValue(path string) (name string, ok bool) {
	name = EnvName(path)
	v, ok := os.LookupEnv(name)
	return name, ok && v != ""
}
