package dlq_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/walrelay/walrelay/internal/dlq"
	"github.com/walrelay/walrelay/schema"
)

func TestListCutSaysWhetherTheLimitLeftRowsOut(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.park(parked(1, orderB), behind(2, orderB, 1), parked(3, orderA))
	for _, tc := range []struct {
		limit   int
		want    []schema.Position
		wantCut bool
	}{
		{0, []schema.Position{pos(3), pos(1), pos(2)}, false},
		{2, []schema.Position{pos(3), pos(1)}, true},
		{3, []schema.Position{pos(3), pos(1), pos(2)}, false},
		{4, []schema.Position{pos(3), pos(1), pos(2)}, false},
	} {
		es, cut, err := f.store.ListCut(ctx, dlq.Filter{Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		if got := positions(es); !reflect.DeepEqual(got, tc.want) || cut != tc.wantCut {
			t.Errorf("ListCut(limit %d) = %v, cut %v; want %v, cut %v", tc.limit, got, cut, tc.want, tc.wantCut)
		}
	}
	if _, _, err := f.store.ListCut(ctx, dlq.Filter{Status: "gone"}); err == nil {
		t.Error("ListCut with status gone = nil error; want an error")
	}
}
