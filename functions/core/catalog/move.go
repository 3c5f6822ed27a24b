package catalog

import "time"

// MoveState is where a move of a retailer between shards is (DESIGN 14).
type MoveState string

// The states of a move: copying (the catalog is copied while uploads and
// reads go on), switching (writes of the retailer are held back while the
// copy is finished and its shard changes), done (the retailer lives on the
// new shard and nothing of it is left on the old one), failed (it lives,
// whole, on the old shard).
const (
	MoveCopying   MoveState = "copying"
	MoveSwitching MoveState = "switching"
	MoveDone      MoveState = "done"
	MoveFailed    MoveState = "failed"
)

// Move is a move of a retailer from one shard to another, as GET
// /v1/admin/moves/{move_id} answers it.
type Move struct {
	ID         string    `json:"move_id"`
	State      MoveState `json:"state"`
	RetailerID string    `json:"retailer_id"`
	FromShard  int       `json:"from_shard"`
	ToShard    int       `json:"to_shard"`
	// Step is the step the move is at (or ended at), for on-call.
	Step string `json:"step"`
	// RowsCopied of RowsTotal: the catalog's rows (products and consumer
	// versions) copied so far, and how many there were when it started.
	RowsCopied int64     `json:"rows_copied"`
	RowsTotal  int64     `json:"rows_total"`
	Error      string    `json:"error"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Running says whether the move has not ended yet.
func (m Move) Running() bool { return m.State == MoveCopying || m.State == MoveSwitching }
