// Command accesslogs is a small HTTP service storing users' access logs
// in a Spanner table, moved to new keys cohort by cohort through the
// cutover library: the handlers speak in old keys, the library routes
// each call by the phase of the user's cohort.
//
//	go run ./examples/accesslogs -c migration.yaml -migration logs-v2 -addr :8080
//	curl -X PUT  localhost:8080/logs/alice/1 -d '/home'
//	curl         localhost:8080/logs/alice/1
//	curl -X DELETE localhost:8080/logs/alice/1
//	curl         localhost:8080/stats
//
// The config is the migration's (`rekey run -c`), with `cohort: {user:
// UserId}`; the source table is AccessLogs (UserId STRING, Seq INT64,
// Page STRING).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"strconv"
	"strings"

	"cloud.google.com/go/spanner"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/record"
)

func main() {
	cfg := flag.String("c", "", "the migration's config file")
	name := flag.String("migration", "", "the migration's name in the phase store")
	addr := flag.String("addr", ":8080", "listen address")
	db := flag.String("database", "", "the application's database, projects/P/instances/I/databases/D")
	flag.Parse()
	ctx := context.Background()
	client, err := spanner.NewClient(ctx, *db)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lib, err := cutover.OpenSpanner(ctx, client, *cfg, cutover.Options{Migration: *name})
	if err != nil {
		log.Fatal(err)
	}
	defer lib.Close()
	log.Fatal(http.ListenAndServe(*addr, Handler(lib)))
}

// Handler serves /logs/USER/SEQ (GET, PUT with the page as the body,
// DELETE) and /stats (the library's counters) through lib.
func Handler(lib *cutover.Spanner) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/logs/", func(w http.ResponseWriter, r *http.Request) {
		user, seq, ok := parsePath(r.URL.Path)
		if !ok {
			http.Error(w, "want /logs/USER/SEQ", http.StatusBadRequest)
			return
		}
		key := record.Record{Table: "AccessLogs", Fields: []record.Field{{Name: "UserId", Value: record.String(user)}, {Name: "Seq", Value: record.Int(seq)}}}
		switch r.Method {
		case http.MethodGet:
			row, found, err := lib.Read(r.Context(), key)
			switch {
			case err != nil:
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			case !found:
				http.NotFound(w, r)
			default:
				page, _ := row.Get("Page")
				fmt.Fprint(w, page.Str)
			}
		case http.MethodPut:
			body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			key.Fields = append(key.Fields, record.Field{Name: "Page", Value: record.String(string(body))})
			if err := lib.Write(r.Context(), key); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		case http.MethodDelete:
			if err := lib.Delete(r.Context(), key); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "GET, PUT or DELETE", http.StatusMethodNotAllowed)
		}
	})
	mux.HandleFunc("/stats", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(lib.Stats())
	})
	return mux
}

func parsePath(p string) (user string, seq int64, ok bool) {
	parts := strings.Split(strings.TrimPrefix(p, "/logs/"), "/")
	if len(parts) != 2 || parts[0] == "" {
		return "", 0, false
	}
	seq, err := strconv.ParseInt(parts[1], 10, 64)
	return parts[0], seq, err == nil
}
