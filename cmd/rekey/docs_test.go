package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The documentation (README.md and docs/*.md) is checked against the code:
// every rekey command line it shows names a real command and only flags
// that command has, and every relative link points at a file (and heading)
// that exists.

// repoRoot is the repository's root, seen from this package.
const repoRoot = "../.."

// docFiles returns README.md and every docs/*.md, relative to repoRoot.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(more) == 0 {
		t.Fatal("no docs/*.md found")
	}
	for _, f := range more {
		rel, err := filepath.Rel(repoRoot, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// docText is a markdown file split into what the checks look at.
type docText struct {
	name string
	// fenced holds the lines of fenced code blocks by line number (1-based).
	fenced map[int]string
	// prose is the file with the fenced blocks' contents blanked (their
	// line breaks kept, so offsets still give line numbers).
	prose string
}

var fenceRE = regexp.MustCompile("^\\s*(```|~~~)")

func readDoc(t *testing.T, name string) docText {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	d := docText{name: name, fenced: map[int]string{}}
	var prose []string
	in := false
	for i, line := range strings.Split(string(b), "\n") {
		if fenceRE.MatchString(line) {
			in = !in
			prose = append(prose, "")
			continue
		}
		if in {
			d.fenced[i+1] = line
			prose = append(prose, "")
			continue
		}
		prose = append(prose, line)
	}
	d.prose = strings.Join(prose, "\n")
	return d
}

// lineAt is the 1-based line number of offset off in s.
func lineAt(s string, off int) int { return strings.Count(s[:off], "\n") + 1 }

// A rekey command line: the program (rekey, a binary built from
// ./cmd/rekey, or go run ./cmd/rekey) where a shell command starts — at
// the start of the line or span (after a prompt "$ " and variable
// assignments), or after |, ;, & or ( as in "$(rekey ...)" — then at
// least one argument. "rekey:" (rekey's own output), names such as
// rekey-demo or cmd/rekey/, and the binary given as an argument
// (--worker_binary ./rekey-linux) do not match.
var cmdRE = regexp.MustCompile(`(?:^\s*(?:\$\s+)?|[|;&(]\s*)(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(go run \./cmd/rekey|\./rekey-linux|rekey)[ \t]+`)

// docCommand is one rekey command line found in a document.
type docCommand struct {
	line int
	text string // the arguments after the program
}

// commandsIn returns the rekey command lines of d: in fenced code blocks
// (a line ending in \ continues on the next) and in inline code.
func commandsIn(d docText) []docCommand {
	var cmds []docCommand
	lines := make([]int, 0, len(d.fenced))
	for n := range d.fenced {
		lines = append(lines, n)
	}
	sort.Ints(lines)
	for i := 0; i < len(lines); i++ {
		n, text := lines[i], d.fenced[lines[i]]
		for strings.HasSuffix(strings.TrimRight(text, " \t"), `\`) && i+1 < len(lines) && lines[i+1] == lines[i]+1 {
			i++
			text = strings.TrimSuffix(strings.TrimRight(text, " \t"), `\`) + " " + d.fenced[lines[i]]
		}
		trimmed := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "$ "))
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "//") {
			continue // a comment
		}
		for _, m := range cmdRE.FindAllStringSubmatchIndex(text, -1) {
			cmds = append(cmds, docCommand{line: n, text: text[m[1]:]})
		}
	}
	// Inline code may run across a line break.
	inline := regexp.MustCompile("`([^`]+)`")
	for _, m := range inline.FindAllStringSubmatchIndex(d.prose, -1) {
		span := strings.ReplaceAll(d.prose[m[2]:m[3]], "\n", " ")
		for _, c := range cmdRE.FindAllStringSubmatchIndex(span, -1) {
			cmds = append(cmds, docCommand{line: lineAt(d.prose, m[2]), text: span[c[1]:]})
		}
	}
	return cmds
}

// cutCommand returns the part of s that belongs to the rekey command: up
// to a shell comment, pipe, redirection, separator or the end of a $(...)
// or of a backquoted span, outside quotes and brackets (a synopsis writes
// alternatives as [--a | --b] and (x | y)).
func cutCommand(s string) string {
	depth := 0
	var quote rune
	prev := ' '
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '[' || r == '(' || r == '{':
			depth++
		case r == ']' || r == '}':
			if depth > 0 {
				depth--
			}
		case r == ')':
			if depth == 0 {
				return s[:i]
			}
			depth--
		case r == '`':
			return s[:i]
		case depth == 0 && (r == ';' || r == '&'):
			return s[:i]
		case depth == 0 && unicode.IsSpace(prev) && (r == '#' || r == '|' || r == '<' || r == '>'):
			return s[:i]
		}
		prev = r
	}
	return s
}

// docToken is one word of a command line; quoted says it began inside
// quotes (a value, never a command or flag).
type docToken struct {
	s      string
	quoted bool
}

func tokenize(s string) []docToken {
	var toks []docToken
	var cur strings.Builder
	var quote rune
	quoted, have := false, false
	flush := func() {
		if have {
			toks = append(toks, docToken{cur.String(), quoted})
		}
		cur.Reset()
		quoted, have = false, false
	}
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, quoted, have = r, true, true
		case unicode.IsSpace(r):
			flush()
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	flush()
	return toks
}

var (
	subcommandRE  = regexp.MustCompile(`^[a-z][a-z0-9_-]*(\|[a-z][a-z0-9_-]*)*$`)
	placeholderRE = regexp.MustCompile(`^[A-Z][A-Z0-9_.]*$`)
	flagRE        = regexp.MustCompile(`^(--?)([A-Za-z][A-Za-z0-9_-]*)`)
)

// checkCommand resolves the command path of text (the arguments after the
// program) in root's tree and checks every flag written after it. It
// returns what is wrong, one message per problem.
func checkCommand(root *cobra.Command, text string) []string {
	toks := tokenize(cutCommand(text))
	// Walk the command path; a|b names alternative subcommands, each
	// checked with the rest of the line.
	paths := []*cobra.Command{root}
	i := 0
	for ; i < len(toks); i++ {
		tk := toks[i]
		word := strings.Trim(tk.s, "[](),.:")
		if tk.quoted || !subcommandRE.MatchString(word) || !paths[0].HasSubCommands() {
			if !tk.quoted && placeholderRE.MatchString(word) && paths[0].HasSubCommands() {
				return nil // rekey COMMAND --help: no particular command
			}
			break
		}
		var next []*cobra.Command
		for _, c := range paths {
			for _, alt := range strings.Split(word, "|") {
				sub := findSub(c, alt)
				if sub == nil {
					return []string{fmt.Sprintf("unknown command %q", strings.TrimSpace(c.CommandPath()+" "+alt))}
				}
				next = append(next, sub)
			}
		}
		paths = next
	}
	var problems []string
	for _, tk := range toks[i:] {
		if tk.quoted {
			continue
		}
		word := strings.TrimLeft(tk.s, "[(")
		if word == "rekey" {
			break // another command begins ("(or rekey --version)"), checked on its own if it is one
		}
		m := flagRE.FindStringSubmatch(word)
		if m == nil {
			continue
		}
		for _, c := range paths {
			if !hasFlag(c, m[1], m[2]) {
				problems = append(problems, fmt.Sprintf("%q has no flag %s%s", c.CommandPath(), m[1], m[2]))
			}
		}
	}
	return problems
}

func findSub(c *cobra.Command, name string) *cobra.Command {
	for _, sub := range c.Commands() {
		if sub.Name() == name || sub.HasAlias(name) {
			return sub
		}
	}
	return nil
}

// hasFlag says whether c has the flag --name (dashes "--") or -name (a
// shorthand, "-"), as its own, inherited, or one of Beam's flags that
// the pipeline commands pass through (declared on them, hidden).
func hasFlag(c *cobra.Command, dashes, name string) bool {
	if name == "help" || (dashes == "-" && name == "h") {
		return true // every command has cobra's help flag
	}
	sets := []*pflag.FlagSet{c.Flags(), c.InheritedFlags(), c.PersistentFlags()}
	for _, fs := range sets {
		if dashes == "--" && fs.Lookup(name) != nil {
			return true
		}
		if dashes == "-" && len(name) == 1 && fs.ShorthandLookup(name) != nil {
			return true
		}
	}
	return false
}

// docRoot is the command tree as rekey builds it, with the flags cobra
// adds only when a command runs (--version on the root).
func docRoot() *cobra.Command {
	root := newCmdRoot(&factory{})
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	return root
}

func TestDocsCommandsAndFlagsExist(t *testing.T) {
	root := docRoot()
	checked := 0
	for _, name := range docFiles(t) {
		d := readDoc(t, name)
		for _, c := range commandsIn(d) {
			checked++
			for _, p := range checkCommand(root, c.text) {
				t.Errorf("%s:%d: %s (in: rekey %s)", name, c.line, p, strings.TrimSpace(cutCommand(c.text)))
			}
		}
	}
	// The README alone shows dozens; finding few means the scan broke.
	if checked < 100 {
		t.Errorf("only %d rekey command lines found in the documentation", checked)
	}
}

// The checker itself: it finds what is wrong, and nothing that is not.
func TestDocsCommandChecker(t *testing.T) {
	root := docRoot()
	for _, tc := range []struct {
		text string
		want string // "" for no problem
	}{
		{"run -c m.yaml --runner dataflow --project p --region r --dry_run", ""},
		{"run -c FILE [--runner prism|direct] [--create-target] [Beam flags]", ""},
		{"cohort status|log -c FILE --migration NAME", ""},
		{"completion bash|zsh|fish|powershell", ""},
		{"rewrite (--strategy NAME [--param key=value ...] [--key \"Col TYPE, ...\"] | -c FILE) [--explain]", ""},
		{"cohort advance -c $C --migration $M --cohorts 0-99 --to dual_write # the --made-up comment", ""},
		{"cohort id alice 42", ""},
		{"COMMAND --help", ""},
		{"--version", ""},
		{`emulators up -c migration.yaml)"`, ""},
		{"run -c m.yaml --made-up-flag", `"rekey run" has no flag --made-up-flag`},
		{"run -c m.yaml --worker-binary x", `"rekey run" has no flag --worker-binary`},
		{"cohort status|lag -c FILE", `unknown command "rekey cohort lag"`},
		{"cohort frobnicate", `unknown command "rekey cohort frobnicate"`},
		{"demo --project p", `"rekey demo" has no flag --project`},
		{"validate -x", `"rekey validate" has no flag -x`},
	} {
		got := checkCommand(root, tc.text)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("rekey %s: %v, want no problem", tc.text, got)
		case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
			t.Errorf("rekey %s: %q, want %q", tc.text, got, tc.want)
		}
	}
}

var (
	linkRE    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$`)
	inlineRE  = regexp.MustCompile("`[^`]*`")
)

// anchors returns the ids GitHub gives the headings of d.
func anchors(d docText) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRE.FindAllStringSubmatch(d.prose, -1) {
		id := slug(m[1])
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// slug is GitHub's heading id: lower case, punctuation but - and _
// dropped, spaces as -.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

func TestDocsRelativeLinksResolve(t *testing.T) {
	docs := map[string]docText{}
	for _, name := range docFiles(t) {
		docs[name] = readDoc(t, name)
	}
	checked := 0
	for _, name := range docFiles(t) {
		d := docs[name]
		// Links inside inline code are not links: blank it, keeping offsets.
		prose := inlineRE.ReplaceAllStringFunc(d.prose, func(s string) string {
			return strings.Map(func(r rune) rune {
				if r == '\n' {
					return r
				}
				return ' '
			}, s)
		})
		for _, m := range linkRE.FindAllStringSubmatchIndex(prose, -1) {
			target := prose[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			line := lineAt(prose, m[0])
			path, frag, _ := strings.Cut(target, "#")
			file := name
			if path != "" {
				file = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), path)))
				if _, err := os.Stat(filepath.Join(repoRoot, file)); err != nil {
					t.Errorf("%s:%d: link %q: no such file %s", name, line, target, file)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			td, ok := docs[file]
			if !ok {
				td = readDoc(t, file)
			}
			if !anchors(td)[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading #%s", name, line, target, file, frag)
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found in the documentation", checked)
	}
}
