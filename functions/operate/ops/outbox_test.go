package ops_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// park parks every waiting change event of a retailer, as the relay does
// with an event SNS refuses.
func (f *fixture) park(retailerID, reason string) int {
	f.t.Helper()
	ctx := context.Background()
	shard, err := f.store.RetailerShard(ctx, retailerID)
	require.NoError(f.t, err)
	c, err := f.store.ClaimOutbox(ctx, shard, catalog.OutboxFilter{RetailerID: retailerID}, 100, time.Minute)
	require.NoError(f.t, err)
	var st catalog.OutboxSettlement
	for _, e := range c.Entries {
		st.Failed = append(st.Failed, catalog.OutboxFailure{ID: e.ID, Error: reason, Counted: true, Park: true})
	}
	_, _, err = f.store.SettleOutbox(ctx, shard, c.Token, st)
	require.NoError(f.t, err)
	return len(c.Entries)
}

// outbox/parked lists the parked change events, of a retailer or of every
// one, first parked first, with what catalogctl dlq list outbox prints;
// outbox/redrive unparks them (attempts reset) for the sweeper, a
// retailer's or every one, up to a limit, and says what is left.
func TestParkedOutboxListedAndRedriven(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.onboard("r2")
	f.upload("r1", catalogCSV) // two chunks, then applied
	require.Equal(t, 3, f.park("r1", "sns refused the message: InvalidParameter: too long"))
	f.upload("r2", catalogCSV)
	require.Equal(t, 3, f.park("r2", "sns throttled the message"))

	var list ops.ParkedOutboxJSON
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/outbox/parked?limit=2", adminToken, nil, &list))
	require.Equal(t, "outbox", list.Queue)
	require.EqualValues(t, 6, list.Parked)
	require.Len(t, list.Events, 2)
	e := list.Events[0]
	require.Equal(t, "r1", e.RetailerID)
	require.Equal(t, "catalog.changes", e.Type)
	require.NotNil(t, e.Seq)
	require.Equal(t, "r1:1:changes:0", e.EventID)
	require.Equal(t, 1, e.Attempts)
	require.Equal(t, "sns refused the message: InvalidParameter: too long", e.LastError)
	require.False(t, e.ParkedAt.IsZero())
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/outbox/parked?retailer_id=r2", adminToken, nil, &list))
	require.EqualValues(t, 3, list.Parked)
	require.Len(t, list.Events, 3)
	require.Equal(t, "r2:1:applied", list.Events[2].EventID)
	require.Nil(t, list.Events[2].Seq)

	var moved ops.RedriveResponse
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, map[string]any{"retailer_id": "r2", "limit": 2}, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "outbox", Moved: 2, Left: 1}, moved)
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, nil, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "outbox", Moved: 4, Left: 0}, moved, "every retailer's")
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, nil, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "outbox", Moved: 0, Left: 0}, moved, "nothing left: a second redrive is harmless")
	left := pgstoretest.Outbox(t, f.store)
	require.Len(t, left, 6, "back in the outbox, for the sweeper")
	for _, e := range left {
		require.Zero(t, e.Attempts)
	}
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/outbox/parked", adminToken, nil, &list))
	require.Equal(t, ops.ParkedOutboxJSON{Queue: "outbox", Events: []ops.ParkedEventJSON{}}, list)

	require.Equal(t, http.StatusNotFound, f.request(http.MethodGet, "/v1/admin/outbox/parked?retailer_id=nobody", adminToken, nil, nil))
	require.Equal(t, http.StatusNotFound, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, map[string]string{"retailer_id": "nobody"}, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodGet, "/v1/admin/outbox/parked?retailer_id=bad%20id", adminToken, nil, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodGet, "/v1/admin/outbox/parked?limit=101", adminToken, nil, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, map[string]int{"limit": 0}, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/outbox/redrive", adminToken, map[string]any{"queue": "x"}, nil))
	require.Equal(t, http.StatusUnauthorized, f.request(http.MethodGet, "/v1/admin/outbox/parked", "", nil, nil))
	require.Equal(t, http.StatusForbidden, f.request(http.MethodGet, "/v1/admin/outbox/parked", "token-r1", nil, nil))
	require.Equal(t, http.StatusForbidden, f.request(http.MethodPost, "/v1/admin/outbox/redrive", "token-r1", nil, nil))
}

// why says, at the state of the newest upload, how many of the retailer's
// change events are parked, without changing its verdict.
func TestWhyMentionsParkedEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	requireVerdict(t, f.why("r1", ""), ops.VerdictCurrent)
	require.NotContains(t, describe(f.why("r1", "")), "parked")
	f.park("r1", "sns refused the message")
	got := f.why("r1", "")
	requireVerdict(t, got, ops.VerdictCurrent)
	var state ops.WhyStep
	for _, s := range got.Steps {
		if s.Check == ops.CheckState {
			state = s
		}
	}
	require.True(t, state.OK, "%s", describe(got))
	require.Contains(t, state.Detail, "; 3 of the retailer's change events are parked in its outbox")
	require.Contains(t, state.Detail, "`catalogctl dlq list outbox --retailer r1`")
}
