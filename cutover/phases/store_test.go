package phases_test

import (
	"context"
	"testing"

	"github.com/rekeyio/rekey/cutover/internal/storetest"
	"github.com/rekeyio/rekey/cutover/phases"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

func TestSpannerStore(t *testing.T) {
	t.Parallel()
	c := emulator.TestDB(t, phases.SpannerDDL...)
	storetest.Run(t, phases.SpannerStore{Client: c})
}

func TestDatastoreStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, phases.DatastoreStore{Client: emulator.TestDatastore(t), Namespace: emulator.UniqueNamespace("cutover")})
}

func TestCreateSpannerTables(t *testing.T) {
	t.Parallel()
	c := emulator.TestDB(t)
	ctx := context.Background()
	db := c.DatabaseName()
	ran, err := phases.CreateSpannerTables(ctx, c, db)
	if err != nil || len(ran) != len(phases.SpannerDDL) {
		t.Fatalf("CreateSpannerTables on an empty database ran %d statements, %v; want %d", len(ran), err, len(phases.SpannerDDL))
	}
	if ran, err := phases.CreateSpannerTables(ctx, c, db); err != nil || len(ran) != 0 {
		t.Errorf("CreateSpannerTables again ran %d statements, %v; want none", len(ran), err)
	}
	if m, err := (phases.SpannerStore{Client: c}).Load(ctx, "m"); err != nil || m.Version != 0 {
		t.Errorf("Load after creating the tables: %+v, %v", m, err)
	}
}
