package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rekeyio/rekey/internal/store/emulator"
	"github.com/rekeyio/rekey/internal/store/spannerdb"
	"github.com/rekeyio/rekey/migration/config"
)

const emulatorsLong = `Local Google emulators to try a config on before touching a real project:
the Cloud Spanner emulator and the Firestore emulator in Datastore mode
(google-cloud-sdk components cloud-spanner-emulator and
cloud-firestore-emulator, the latter with Java 17+).

  eval "$(rekey emulators up -c migration.yaml --seed)"
  rekey run -c migration.yaml --create-target
  rekey emulators down

Each bundled config (configs/*.yaml) says in its comment the two commands
that run it, e.g. for configs/jsonl-to-spanner.yaml:

  eval "$(rekey emulators up -c configs/jsonl-to-spanner.yaml --seed)"
  rekey run -c configs/jsonl-to-spanner.yaml

"up" starts both emulators in the background, where they outlive it, and
prints the shell's export lines on standard output (its notes go to
standard error). "down" stops exactly what "up" started.`

const emulatorsUpLong = `Starts the Spanner emulator and the Firestore emulator (Datastore mode) on
127.0.0.1, detached, so they keep running after the command; waits until
both answer; and prints, on standard output and nothing else there,

  export SPANNER_EMULATOR_HOST=127.0.0.1:PORT
  export DATASTORE_EMULATOR_HOST=127.0.0.1:PORT
  export DATASTORE_PROJECT_ID=PROJECT

for eval "$(rekey emulators up ...)": the Google client libraries, and so
rekey, go to the emulators while these are set. PROJECT is the config's
Datastore project, else rekey-demo (the bundled configs' project).

With -c FILE, what the config's source and target name is made ready:
a Spanner endpoint's instance and database are created (empty: tables are
not created; a Spanner source's tables and rows are yours to create, and
'rekey run --create-target' creates the target's tables from a Spanner
source). A Datastore endpoint needs nothing created (databases, namespaces
and kinds exist once an entity is written); DATASTORE_PROJECT_ID is its project.

With --ddl FILE (and -c), the GoogleSQL DDL statements of FILE (separated
by ';'; comments allowed) run in the config's Spanner database, the
source's if it is one, else the target's: your own tables, to fill with
your data (a 'rekey run' with strategy none imports a JSON Lines or CSV
file into a table as it is). A CREATE of a table, index, view or change
stream that exists is kept, not run, so running it again changes nothing.

With --seed (and -c), also what a run needs to find there: a Spanner
source table is created (if missing) and loaded with the bundled
access-log sample (2,000 rows keyed by LastAccess, UserId); a Datastore
source gets the bundled customer sample (1,000 entities of its kind, ids
1..1000, each with Order children); a Spanner target that rekey cannot
derive from its source (a files or Datastore source) is created, keyed by
the rewritten source.key, with a column for each field of the source's
records. What exists is kept; rows and entities are upserted.

What was started (process groups, ports, logs) is recorded in the state
file rekey-emulators.json in --state DIR (default: $XDG_RUNTIME_DIR, else
the temporary directory). Run again while they live, "up" reuses them:
it prints the exports again and creates what a config names that is
missing, and starts only an emulator that is no longer running. Ports
are free ones unless --spanner-port / --datastore-port say.`

const emulatorsDownLong = `Stops the emulators "rekey emulators up" recorded in its state file (each
process group: SIGTERM, then SIGKILL after 5 s), removes their logs and
the state file, and prints "unset" lines for the variables up exported,
for eval "$(rekey emulators down)". With nothing recorded it says so and
succeeds.`

// stateFileName is the file in the state directory that records what
// `emulators up` started.
const stateFileName = "rekey-emulators.json"

// stopGrace is how long down waits after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

// EmulatorsUpOptions are the parsed flags of `rekey emulators up`.
type EmulatorsUpOptions struct {
	IO     stdio
	Config string
	// Ports, per emulator; 0 chooses a free port.
	Ports    map[emulator.Kind]int
	StateDir string
	// Seed also loads the samples into the config's source and creates
	// the Spanner target tables rekey cannot derive (seedStores).
	Seed bool
	// DDL are files of GoogleSQL DDL to run in the config's Spanner
	// database (applyDDLFile).
	DDL []string
}

// EmulatorsDownOptions are the parsed flags of `rekey emulators down`.
type EmulatorsDownOptions struct {
	IO       stdio
	StateDir string
}

func newCmdEmulators(f *factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "emulators",
		Short: "start and stop local Spanner and Datastore emulators for a config: up, down",
		Long:  emulatorsLong,
		Args:  unknownSubcommand,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usagef("emulators: no subcommand given")
		},
	}
	cmd.SuggestionsMinimumDistance = 2
	cmd.AddCommand(newCmdEmulatorsUp(f), newCmdEmulatorsDown(f))
	return cmd
}

func newCmdEmulatorsUp(f *factory) *cobra.Command {
	opts := &EmulatorsUpOptions{IO: f.IO, Ports: map[emulator.Kind]int{}}
	var spannerPort, datastorePort int
	cmd := &cobra.Command{
		Use:   "up [-c FILE [--seed] [--ddl SCHEMA.sql]] [--spanner-port P] [--datastore-port P] [--state DIR]",
		Short: "start both emulators (or reuse those running), create the config's Spanner database, print export lines",
		Long:  emulatorsUpLong,
		Example: `  eval "$(rekey emulators up -c migration.yaml)"
  eval "$(rekey emulators up -c configs/spanner-to-spanner.yaml --seed)"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for name, p := range map[string]int{"--spanner-port": spannerPort, "--datastore-port": datastorePort} {
				if p < 0 || p > 65535 {
					return usagef("emulators up: %s must be 0..65535 (0: a free port), got %d", name, p)
				}
			}
			opts.Ports[emulator.Spanner], opts.Ports[emulator.Datastore] = spannerPort, datastorePort
			if opts.Seed && opts.Config == "" {
				return usagef("emulators up: --seed needs -c FILE (what to seed is the config's source and target)")
			}
			if len(opts.DDL) > 0 && opts.Config == "" {
				return usagef("emulators up: --ddl needs -c FILE (the DDL runs in the config's Spanner database)")
			}
			return runEmulatorsUp(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Config, "config", "c", "", "config file (YAML) whose Spanner databases to create")
	fl.IntVar(&spannerPort, "spanner-port", 0, "the Spanner emulator's port (0: a free port)")
	fl.IntVar(&datastorePort, "datastore-port", 0, "the Datastore emulator's port (0: a free port)")
	fl.StringVar(&opts.StateDir, "state", "", "directory of the state file (default: $XDG_RUNTIME_DIR, else the temporary directory)")
	fl.StringArrayVar(&opts.DDL, "ddl", nil, "with -c: run this file's GoogleSQL DDL (statements separated by ;) in the config's Spanner database, the source's else the target's; what exists is kept (repeatable)")
	fl.BoolVar(&opts.Seed, "seed", false, "with -c: load the bundled samples into the config's source (a Spanner table, a Datastore kind) and create a Spanner target table rekey cannot derive from its source")
	_ = cmd.MarkFlagFilename("config", "yaml", "yml")
	_ = cmd.MarkFlagDirname("state")
	return cmd
}

func newCmdEmulatorsDown(f *factory) *cobra.Command {
	opts := &EmulatorsDownOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:     "down [--state DIR]",
		Short:   "stop the emulators that up started",
		Long:    emulatorsDownLong,
		Example: `  eval "$(rekey emulators down)"`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEmulatorsDown(opts)
		},
	}
	cmd.Flags().StringVar(&opts.StateDir, "state", "", "directory of the state file (default: $XDG_RUNTIME_DIR, else the temporary directory)")
	_ = cmd.MarkFlagDirname("state")
	return cmd
}

// emulatorState is the state file: the emulators up started, by kind.
type emulatorState struct {
	Emulators map[emulator.Kind]emulator.Launched `json:"emulators"`
}

// stateDir is dir, else $XDG_RUNTIME_DIR, else the temporary directory.
func stateDir(dir string) string {
	if dir != "" {
		return dir
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

// readState reads the state file at path; ok is false when there is none.
func readState(path string) (st emulatorState, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return emulatorState{Emulators: map[emulator.Kind]emulator.Launched{}}, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("reading the emulators' state file: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, false, fmt.Errorf("%s is not a state file of 'rekey emulators up' (%v); remove it once no emulator it names runs", path, err)
	}
	if st.Emulators == nil {
		st.Emulators = map[emulator.Kind]emulator.Launched{}
	}
	for k := range st.Emulators {
		if !slices.Contains(emulator.Kinds, k) {
			return st, false, fmt.Errorf("%s records an unknown emulator %q; remove it once no emulator it names runs", path, k)
		}
	}
	return st, true, nil
}

// writeState replaces the state file at path with st (atomically), or
// removes it when st records nothing.
func writeState(path string, st emulatorState) error {
	if len(st.Emulators) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the emulators' state file: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("the emulators' state directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), stateFileName+".*")
	if err != nil {
		return fmt.Errorf("writing the emulators' state file: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing the emulators' state file %s: %w", path, err)
	}
	return nil
}

func runEmulatorsUp(ctx context.Context, o *EmulatorsUpOptions) error {
	var cfg *config.Config
	if o.Config != "" {
		c, err := loadConfig(o.Config, o.IO.err)
		if err != nil {
			return err
		}
		cfg = c
	}
	dir := stateDir(o.StateDir)
	path := filepath.Join(dir, stateFileName)
	st, _, err := readState(path)
	if err != nil {
		return err
	}
	if err := ensureEmulators(ctx, o, path, &st); err != nil {
		return err
	}
	spanner, datastore := st.Emulators[emulator.Spanner], st.Emulators[emulator.Datastore]
	project := bundledProject
	if cfg != nil {
		// The admin clients read the emulator's address from the
		// environment (this process's only; the command ends soon after).
		os.Setenv(emulator.EnvSpannerHost, spanner.Host)
		os.Setenv(emulator.EnvDatastoreHost, datastore.Host)
		err := prepareStores(ctx, cfg, o.IO.err, o.Seed)
		if err == nil && len(o.DDL) > 0 {
			var e endpointRole
			if e, err = ddlEndpoint(cfg); err == nil {
				for _, f := range o.DDL {
					if err = applyDDLFile(ctx, e, f, o.IO.err); err != nil {
						break
					}
				}
			}
		}
		if err == nil && o.Seed {
			err = seedStores(ctx, cfg, o.IO.err)
		}
		if err != nil {
			return fmt.Errorf("%s: %w (the emulators keep running; 'rekey emulators down%s' stops them)", o.Config, err, stateFlag(o.StateDir))
		}
		project = datastoreProject(cfg)
	}
	fmt.Fprintf(o.IO.err, "rekey: recorded in %s; eval \"$(rekey emulators up ...)\" sets the exported variables in your shell, 'rekey emulators down%s' stops the emulators\n", path, stateFlag(o.StateDir))
	_, err = io.WriteString(o.IO.out, exportText(spanner.Host, datastore.Host, project))
	return err
}

// ensureEmulators reuses each emulator st records that still runs and
// answers, and starts the others, recording each in st and in the state
// file at path as soon as it runs. On an error it stops what it started.
func ensureEmulators(ctx context.Context, o *EmulatorsUpOptions, path string, st *emulatorState) (err error) {
	var started []emulator.Kind
	defer func() {
		if err == nil {
			return
		}
		for _, k := range started {
			_, _ = st.Emulators[k].Stop(stopGrace)
			delete(st.Emulators, k)
		}
		if len(started) > 0 {
			err = errors.Join(err, writeState(path, *st))
		}
	}()
	for _, k := range emulator.Kinds {
		l, ok := st.Emulators[k]
		port := o.Ports[k]
		if ok && l.Alive() && l.Answers() {
			if port != 0 && port != l.Port() {
				return usagef("emulators up: the %s runs on %s already; 'rekey emulators down' first to move it to port %d", k.Title(), l.Host, port)
			}
			fmt.Fprintf(o.IO.err, "rekey: reusing the %s on %s (process group %d, log %s)\n", k.Title(), l.Host, l.PID, l.Log)
			continue
		}
		if ok {
			if _, err := l.Stop(stopGrace); err != nil {
				return err
			}
			fmt.Fprintf(o.IO.err, "rekey: the recorded %s (process group %d) is no longer running; starting another\n", k.Title(), l.PID)
			delete(st.Emulators, k)
		}
		logPath := filepath.Join(filepath.Dir(path), fmt.Sprintf("rekey-emulators-%s.log", k))
		l, err := emulator.Launch(ctx, k, port, logPath)
		if err != nil {
			return err
		}
		st.Emulators[k] = l
		started = append(started, k)
		if err := writeState(path, *st); err != nil {
			return err
		}
		fmt.Fprintf(o.IO.err, "rekey: started the %s on %s (process group %d, log %s)\n", k.Title(), l.Host, l.PID, l.Log)
	}
	return nil
}

// endpointRole is an endpoint of a config with its role.
type endpointRole struct {
	role string // source, target
	ep   config.Endpoint
}

func endpoints(cfg *config.Config) []endpointRole {
	return []endpointRole{{"source", cfg.Source}, {"target", cfg.Target}}
}

// prepareStores creates the Spanner instances and databases cfg names on
// the emulator (SPANNER_EMULATOR_HOST) and says, on w, what each endpoint
// still needs.
func prepareStores(ctx context.Context, cfg *config.Config, w io.Writer, seed bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done := map[string]bool{}
	for _, e := range endpoints(cfg) {
		if !storeKindOf(e.ep.Type).spannerDB {
			io.WriteString(w, storeNote(cfg, e, false, false, seed))
			continue
		}
		path := spannerdb.DatabasePath(e.ep.Project, e.ep.Instance, e.ep.Database)
		var created bool
		if !done[path] {
			var err error
			if created, err = emulator.EnsureSpannerDatabase(ctx, e.ep.Project, e.ep.Instance, e.ep.Database); err != nil {
				return fmt.Errorf("%s: %w", e.role, err)
			}
		}
		io.WriteString(w, storeNote(cfg, e, created, done[path], seed))
		done[path] = true
	}
	return nil
}

// storeNote says what up did for endpoint e and what it still needs:
// created says the Spanner database was created now, again that it was
// handled for the other endpoint already, seed that --seed follows.
func storeNote(cfg *config.Config, e endpointRole, created, again, seed bool) string {
	var b strings.Builder
	n := upNote{endpointRole: e, fromSpanner: storeKindOf(cfg.Source.Type).spannerDB, created: created, again: again, seed: seed, b: &b}
	storeKindOf(e.ep.Type).note(n)
	return b.String()
}

// upNote is what storeNote is told of an endpoint, and where its note
// goes; fromSpanner says the config's source is a Spanner database (from
// which 'rekey run --create-target' derives a Spanner target's table).
type upNote struct {
	endpointRole
	fromSpanner, created, again, seed bool
	b                                 *strings.Builder
}

// say adds a line of the note.
func (n upNote) say(format string, args ...any) {
	fmt.Fprintf(n.b, "rekey: %s: "+format+"\n", append([]any{n.role}, args...)...)
}

// spannerNote is the note of a Spanner database.
func spannerNote(n upNote) {
	ep := n.ep
	db := spannerdb.DatabasePath(ep.Project, ep.Instance, ep.Database)
	switch {
	case n.again:
		n.say("the Spanner database %s (also the %s's)", db, other(n.role))
	case n.created:
		n.say("created the Spanner database %s (empty)", db)
	default:
		n.say("the Spanner database %s exists", db)
	}
	switch {
	case n.seed && (n.role == "source" || !n.fromSpanner):
		// seedStores says what it does.
	case n.role == "source":
		n.say("create the table %s there and load its rows, or run up again with --seed to load the bundled access-log sample into it", ep.Table)
	case n.fromSpanner:
		n.say("'rekey run --create-target' creates the table %s from the source's schema", ep.Table)
	default:
		n.say("create the table %s there with the primary key 'rekey run' names (rekey derives tables only from a Spanner source), or run up again with --seed to create it from the rewritten key and the source's records", ep.Table)
	}
}

// datastoreNote is the note of a Datastore database.
func datastoreNote(n upNote) {
	ep := n.ep
	n.say("Datastore project %s, %s, %s, kind %s: nothing to create (databases, namespaces and kinds exist once an entity is written)",
		ep.Project, orDefault("database", ep.Database), orDefault("namespace", ep.Namespace), ep.Kind)
	if n.role == "source" && !n.seed {
		n.say("run up again with --seed to write the bundled customer sample there")
	}
}

// filesNote is the note of files.
func filesNote(n upNote) {
	n.say("%s files at %s: nothing to do on the emulators", n.ep.Type, n.ep.Path)
}

// stateFlag is the --state flag to repeat in a hint, if one was given.
func stateFlag(dir string) string {
	if dir == "" {
		return ""
	}
	return " --state " + shellQuote(dir)
}

func other(role string) string {
	if role == "source" {
		return "target"
	}
	return "source"
}

func orDefault(what, v string) string {
	if v == "" || v == "(default)" {
		return "default " + what
	}
	return what + " " + v
}

// datastoreProject is the project DATASTORE_PROJECT_ID is set to: the
// config's Datastore source's, else its Datastore target's, else
// bundledProject. (Each Datastore endpoint names its project;
// the variable is the default of clients that name none.)
func datastoreProject(cfg *config.Config) string {
	for _, e := range endpoints(cfg) {
		if storeKindOf(e.ep.Type).datastoreDB && e.ep.Project != "" {
			return e.ep.Project
		}
	}
	return bundledProject
}

// bundledProject is the project of the bundled configs (configs/) and of
// the demo: what up exports as DATASTORE_PROJECT_ID without -c, so they
// agree.
const bundledProject = "rekey-demo"

// exportVars are the variables up exports and down unsets.
var exportVars = []string{emulator.EnvSpannerHost, emulator.EnvDatastoreHost, emulator.EnvDatastoreProject}

// exportText is what up prints on standard output.
func exportText(spannerHost, datastoreHost, project string) string {
	var b strings.Builder
	for i, v := range []string{spannerHost, datastoreHost, project} {
		fmt.Fprintf(&b, "export %s=%s\n", exportVars[i], shellQuote(v))
	}
	return b.String()
}

// unsetText is what down prints on standard output.
func unsetText() string { return "unset " + strings.Join(exportVars, " ") + "\n" }

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_.:/@%+,=-]+$`)

// shellQuote quotes s for a POSIX shell unless it needs no quotes.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func runEmulatorsDown(o *EmulatorsDownOptions) error {
	path := filepath.Join(stateDir(o.StateDir), stateFileName)
	st, ok, err := readState(path)
	if err != nil {
		return err
	}
	if !ok || len(st.Emulators) == 0 {
		fmt.Fprintf(o.IO.err, "rekey: no emulators recorded in %s; nothing to stop\n", path)
	}
	var errs []error
	for _, k := range emulator.Kinds {
		l, ok := st.Emulators[k]
		if !ok {
			continue
		}
		stopped, err := l.Stop(stopGrace)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if stopped {
			fmt.Fprintf(o.IO.err, "rekey: stopped the %s on %s (process group %d)\n", k.Title(), l.Host, l.PID)
		} else {
			fmt.Fprintf(o.IO.err, "rekey: the %s on %s (process group %d) had stopped already\n", k.Title(), l.Host, l.PID)
		}
		if err := os.Remove(l.Log); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(o.IO.err, "rekey: warning: %v\n", err)
		}
		delete(st.Emulators, k)
	}
	if err := writeState(path, st); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w (what is left is still recorded in %s)", errors.Join(errs...), path)
	}
	_, err = io.WriteString(o.IO.out, unsetText())
	return err
}
