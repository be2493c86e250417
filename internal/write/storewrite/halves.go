package storewrite

import "context"

// Halves writes a batch of items (a writer's converted records) with
// Commit and isolates the items at fault when the store refuses the
// commit for its content: it commits the halves, recursively, so the good
// items land and each refused item, alone, is passed to Refuse with the
// store's error. What it does with a failed commit, in order:
//
//  1. Settle (if set) may resolve it itself: an insert that met existing
//     records reads them back, counts those stored with the same content
//     as written, refuses the others, and hands back the rest to write
//     again; a client's per-item refusals likewise. Halves then writes
//     the rest.
//  2. Otherwise the error is classified (Classify): NoAccess refuses every
//     item; Transient (its retries spent in Commit) and Fatal are returned
//     through Fail; Content isolates.
type Halves[T any] struct {
	// Commit commits items in one request, its retries included (Retry).
	Commit func(ctx context.Context, items []T) error
	// Settle, optional, is asked about each failed commit first: settled
	// reports that it resolved some items (written or refused) and rest
	// are those left to write. An error of its own is returned.
	Settle func(ctx context.Context, items []T, commitErr error) (rest []T, settled bool, err error)
	// Refuse dead-letters item with err.
	Refuse func(item T, err error)
	// Split, optional, is told of each commit cut in halves.
	Split func()
	// Fail, optional, wraps the error of a commit that failed for a
	// reason that is not its items' (n of them).
	Fail func(n int, err error) error
}

// Write commits items, isolating the refused ones; the error is one that
// is not the items' fault (see Halves).
func (h *Halves[T]) Write(ctx context.Context, items []T) error {
	if len(items) == 0 {
		return nil
	}
	err := h.Commit(ctx, items)
	if err == nil {
		return nil
	}
	if h.Settle != nil && ctx.Err() == nil {
		rest, settled, serr := h.Settle(ctx, items, err)
		if serr != nil {
			return serr
		}
		if settled {
			return h.Write(ctx, rest)
		}
	}
	switch Classify(ctx, err) {
	case Content:
	case NoAccess:
		for _, it := range items {
			h.Refuse(it, err)
		}
		return nil
	default:
		if h.Fail != nil {
			return h.Fail(len(items), err)
		}
		return err
	}
	if len(items) == 1 {
		h.Refuse(items[0], err)
		return nil
	}
	if h.Split != nil {
		h.Split()
	}
	mid := len(items) / 2
	if err := h.Write(ctx, items[:mid]); err != nil {
		return err
	}
	return h.Write(ctx, items[mid:])
}
