package splits

import (
	"fmt"
	"time"

	"cloud.google.com/go/spanner/admin/database/apiv1/databasepb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rekeyio/rekey/rewrite"
)

// MaxPerRequest is the most split points one AddSplitPoints request (and
// so one gcloud splits file) may carry.
const MaxPerRequest = 100

// Initiator tags the split points rekey adds (AddSplitPointsRequest's
// initiator, gcloud's --initiator).
const Initiator = "rekey"

// MaxExpiry is the furthest ahead a split point's expiry may be; Spanner's
// default is DefaultExpiry.
const (
	MaxExpiry     = 30 * 24 * time.Hour
	DefaultExpiry = 10 * 24 * time.Hour
)

// Requests groups the points into AddSplitPoints requests for database
// (projects/P/instances/I/databases/D) of at most MaxPerRequest points
// each, in order; neighbouring points of one table or index share one
// SplitPoints. Every point expires at expire.
func Requests(database string, pts []Point, expire time.Time) ([]*databasepb.AddSplitPointsRequest, error) {
	var reqs []*databasepb.AddSplitPointsRequest
	for start := 0; start < len(pts); start += MaxPerRequest {
		batch := pts[start:min(start+MaxPerRequest, len(pts))]
		req := &databasepb.AddSplitPointsRequest{Database: database, Initiator: Initiator}
		var cur *databasepb.SplitPoints
		for _, p := range batch {
			parts, err := KeyParts(p.Key)
			if err != nil {
				return nil, fmt.Errorf("splits: point %s of %s: %w", rewrite.FormatKey(p.Key, false), object(p), err)
			}
			if cur == nil || cur.Table != p.Table || cur.Index != p.Index {
				cur = &databasepb.SplitPoints{Table: p.Table, Index: p.Index, ExpireTime: timestamppb.New(expire)}
				req.SplitPoints = append(req.SplitPoints, cur)
			}
			cur.Keys = append(cur.Keys, &databasepb.SplitPoints_Key{KeyParts: parts})
		}
		reqs = append(reqs, req)
	}
	return reqs, nil
}

// object names what a point splits: "table T" or "index I".
func object(p Point) string {
	if p.Index != "" {
		return "index " + p.Index
	}
	return "table " + p.Table
}

// KeyParts encodes a key as the API takes it: Spanner's JSON encoding of
// each value (INT64, NUMERIC, TIMESTAMP, DATE and BYTES as strings, BYTES
// in base64; FLOAT64 as a number, BOOL as a bool, NULL as null).
func KeyParts(key []rewrite.Value) (*structpb.ListValue, error) {
	lv := &structpb.ListValue{Values: make([]*structpb.Value, len(key))}
	for i, v := range key {
		pv, err := keyPart(v)
		if err != nil {
			return nil, fmt.Errorf("key part %d: %w", i+1, err)
		}
		lv.Values[i] = pv
	}
	return lv, nil
}

func keyPart(v rewrite.Value) (*structpb.Value, error) {
	switch {
	case v.Null:
		return structpb.NewNullValue(), nil
	case v.Type == rewrite.TypeBool:
		return structpb.NewBoolValue(v.Int != 0), nil
	case v.Type == rewrite.TypeFloat64:
		if err := finite(v.Float); err != nil {
			return nil, err
		}
		return structpb.NewNumberValue(v.Float), nil
	}
	s, err := apiString(v)
	if err != nil {
		return nil, err
	}
	return structpb.NewStringValue(s), nil
}
