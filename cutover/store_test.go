package cutover_test

import (
	"context"
	"testing"

	"github.com/rekeyio/rekey/cutover"
	"github.com/rekeyio/rekey/cutover/internal/storetest"
	"github.com/rekeyio/rekey/internal/store/emulator"
)

func TestSpannerStore(t *testing.T) {
	t.Parallel()
	c := emulator.TestDB(t, cutover.SpannerDDL...)
	storetest.Run(t, cutover.SpannerStore{Client: c})
}

func TestDatastoreStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, cutover.DatastoreStore{Client: emulator.TestDatastore(t), Namespace: emulator.UniqueNamespace("cutover")})
}

func TestCreateSpannerTables(t *testing.T) {
	t.Parallel()
	c := emulator.TestDB(t)
	ctx := context.Background()
	db := c.DatabaseName()
	ran, err := cutover.CreateSpannerTables(ctx, c, db)
	if err != nil || len(ran) != len(cutover.SpannerDDL) {
		t.Fatalf("CreateSpannerTables on an empty database ran %d statements, %v; want %d", len(ran), err, len(cutover.SpannerDDL))
	}
	if ran, err := cutover.CreateSpannerTables(ctx, c, db); err != nil || len(ran) != 0 {
		t.Errorf("CreateSpannerTables again ran %d statements, %v; want none", len(ran), err)
	}
	if m, err := (cutover.SpannerStore{Client: c}).Load(ctx, "m"); err != nil || m.Version != 0 {
		t.Errorf("Load after creating the tables: %+v, %v", m, err)
	}
}
