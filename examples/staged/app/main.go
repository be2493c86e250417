// Command app is the application of the staged-migration example
// (examples/staged/run.sh): users' logs in Datastore, read, written and
// deleted through the cutover library while rekey moves the users to the
// new keys a cohort at a time. It checks what it reads.
//
//	app -c migration.yaml -migration NAME -users N -seed   # write every user's logs, then exit
//	app -c migration.yaml -migration NAME -users N         # run until SIGTERM or SIGINT
//
// Running, it keeps what every record should hold (the latest write it
// was told succeeded) and checks every read against it; on SIGTERM it
// stops, reads every record once more and prints a JSON summary: calls,
// wrong reads, calls that never succeeded, records checked at the end,
// and the library's counters. It exits 1 if any read was wrong.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"cloud.google.com/go/datastore"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/record"
	"github.com/rekeyio/rekey/rewrite"
)

const seqs = 3

type app struct {
	lib *cutover.Datastore
	ns  string

	mu    sync.Mutex
	want  map[string]*string // "user.seq" → page; nil: deleted
	wrong []string
	calls int
	lost  int
}

func main() {
	cfgPath := flag.String("c", "", "the migration's config file")
	name := flag.String("migration", "", "the migration's name in the phase store")
	users := flag.Int("users", 200, "how many users")
	seed := flag.Bool("seed", false, "write every user's logs, then exit")
	workers := flag.Int("workers", 4, "goroutines calling the library")
	project := flag.String("project", "rekey-demo", "the Datastore project (the config's source.project)")
	namespace := flag.String("namespace", "logs", "the application's namespace (the config's source.namespace)")
	flag.Parse()
	ctx := context.Background()
	client, err := datastore.NewClient(ctx, *project)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lib, err := cutover.OpenDatastore(ctx, client, *cfgPath, cutover.Options{Migration: *name})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Close()
	a := &app{lib: lib, ns: *namespace, want: map[string]*string{}}
	for u := range *users {
		for q := range seqs {
			v := "seed"
			a.want[key(u, q)] = &v
		}
	}
	if *seed {
		for u := range *users {
			for q := range seqs {
				if err := a.retry(func() error { return lib.Write(ctx, a.rec(u, q, "seed")) }); err != nil {
					log.Fatal(err)
				}
			}
		}
		fmt.Printf("app: wrote %d logs of %d users\n", *users*seqs, *users)
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.work(ctx, w, *workers, *users, done)
		}()
	}
	<-stop
	close(done)
	wg.Wait()
	// Every record once more: the latest acknowledged write, or nothing.
	checked := 0
	for u := range *users {
		for q := range seqs {
			a.read(ctx, u, q)
			checked++
		}
	}
	summary := map[string]any{"calls": a.calls, "wrong_reads": len(a.wrong), "calls_never_succeeded": a.lost, "checked_at_the_end": checked, "wrong": a.wrong, "library": lib.Stats()}
	out, _ := json.MarshalIndent(summary, "", "  ")
	fmt.Println(string(out))
	if len(a.wrong) > 0 || a.lost > 0 {
		os.Exit(1)
	}
}

func key(u, q int) string { return fmt.Sprintf("user-%d.%d", u, q) }

// rec is user u's log q with page, in old keys.
func (a *app) rec(u, q int, page string) record.Record {
	k := rewrite.DatastoreKey{Namespace: a.ns, Path: []rewrite.PathElement{{Kind: "Log", Name: key(u, q)}}}
	return record.Record{Table: "Log", Key: &k, Fields: []record.Field{
		{Name: "User", Value: record.String(fmt.Sprintf("user-%d", u))},
		{Name: "Seq", Value: record.Int(int64(q))},
		{Name: "Page", Value: record.String(page)},
	}}
}

// retry calls f until it succeeds, for up to 20 s, as an application
// retries a failed call.
func (a *app) retry(f func() error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// work calls the library for the users w owns (u % workers == w), so
// each record's expected value is known exactly.
func (a *app) work(ctx context.Context, w, workers, users int, done chan struct{}) {
	rnd := rand.New(rand.NewPCG(uint64(w), 1))
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
		}
		u := w + workers*rnd.IntN((users-w+workers-1)/workers)
		q := rnd.IntN(seqs)
		switch r := rnd.IntN(100); {
		case r < 40:
			v := fmt.Sprintf("w%d-%d", w, n)
			if a.call(func() error { return a.lib.Write(ctx, a.rec(u, q, v)) }) {
				a.set(key(u, q), &v)
			}
		case r < 50:
			k := a.rec(u, q, "")
			k.Fields = k.Fields[:1]
			if a.call(func() error { return a.lib.Delete(ctx, k) }) {
				a.set(key(u, q), nil)
			}
		default:
			a.read(ctx, u, q)
		}
	}
}

func (a *app) call(f func() error) bool {
	a.mu.Lock()
	a.calls++
	a.mu.Unlock()
	if err := a.retry(f); err != nil {
		a.mu.Lock()
		a.lost++
		a.mu.Unlock()
		log.Printf("app: a call failed for 20 s: %v", err)
		return false
	}
	return true
}

func (a *app) set(k string, v *string) {
	a.mu.Lock()
	a.want[k] = v
	a.mu.Unlock()
}

// read reads log q of user u and checks it.
func (a *app) read(ctx context.Context, u, q int) {
	k := a.rec(u, q, "")
	k.Fields = k.Fields[:1]
	var got record.Record
	var found bool
	if !a.call(func() (err error) { got, found, err = a.lib.Read(ctx, k); return err }) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	want := a.want[key(u, q)]
	page, _ := got.Get("Page")
	switch {
	case want == nil && found:
		a.wrong = append(a.wrong, fmt.Sprintf("%s: %q, want nothing (deleted)", key(u, q), page.Str))
	case want != nil && !found:
		a.wrong = append(a.wrong, fmt.Sprintf("%s: nothing, want %q", key(u, q), *want))
	case want != nil && page.Str != *want:
		a.wrong = append(a.wrong, fmt.Sprintf("%s: %q, want %q", key(u, q), page.Str, *want))
	}
}
