package storewrite

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rekeyio/rekey/internal/write/retry"
)

// Class is what a writer does about a failed commit.
type Class int

// Classes (see the package doc for the table).
const (
	// Fatal errors are returned: the caller retries the whole write.
	Fatal Class = iota
	// Content errors are the records' fault: the commit is isolated.
	Content
	// Transient errors are retried with backoff, then returned.
	Transient
	// NoAccess errors dead-letter the commit's records: no retry helps,
	// and they can be redriven once access is granted.
	NoAccess
)

func (c Class) String() string {
	switch c {
	case Content:
		return "content"
	case Transient:
		return "transient"
	case NoAccess:
		return "no access"
	}
	return "fatal"
}

// infrastructure are the words of a NotFound that names something other
// than a record's parent: Spanner's "Database not found", "Table not
// found", "Session not found", "Instance not found", Datastore's "The
// database (default) does not exist for project ...".
var infrastructure = []string{"database not found", "table not found", "session not found", "instance not found", "does not exist"}

// Classify returns the class of err, a commit's error under ctx.
func Classify(ctx context.Context, err error) Class {
	var pe *PaceError
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.As(err, &pe) {
		return Fatal
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Transient // the attempt's deadline, not the caller's
	}
	s, ok := status.FromError(err)
	if !ok {
		return Fatal
	}
	switch s.Code() {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.OutOfRange:
		return Content
	case codes.NotFound:
		msg := strings.ToLower(s.Message())
		for _, w := range infrastructure {
			if strings.Contains(msg, w) {
				return Fatal
			}
		}
		return Content
	case codes.ResourceExhausted:
		// The emulators' 4 MiB request limit answers ResourceExhausted
		// "gRPC message exceeds maximum size"; a quota answers the same
		// code with another message.
		if m := s.Message(); strings.Contains(m, "exceeds maximum size") || strings.Contains(m, "larger than max") {
			return Content
		}
		return Transient
	case codes.PermissionDenied, codes.Unauthenticated:
		return NoAccess
	}
	if retry.Classify(err) == retry.Transient { // the one list of retryable codes
		return Transient
	}
	return Fatal
}

// Code is err's gRPC code (codes.Unknown without a status; codes.OK for
// nil).
func Code(err error) codes.Code {
	return status.Code(err)
}
