package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// deadLetter is a message of a dead-letter queue that belongs to an upload:
// its S3 event (the arrival or the diff job failed), or one of its chunks.
type deadLetter struct {
	Queue      string // the dead-letter queue's name
	Kind       dlqKind
	RetailerID string
	Generation int64
	Seq        int // the chunk (chunk messages only)
	Chunk      message.ChunkMessage
	SentAt     time.Time
	Receives   int
}

// readDeadLetters peeks at every dead-letter queue (up to DLQPeek messages
// each, none consumed) and returns the messages that belong to an upload.
// Messages it cannot read as such are skipped: they belong to nobody here.
func (h *Handler) readDeadLetters(ctx context.Context) ([]deadLetter, error) {
	if h.inspector == nil {
		return nil, nil
	}
	var out []deadLetter
	for _, q := range h.cfg.Queues.deadLetters() {
		msgs, err := h.inspector.Peek(ctx, q.url, h.cfg.DLQPeek)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", q.name(), err)
		}
		for _, m := range msgs {
			base := deadLetter{Queue: q.name(), Kind: q.kind, SentAt: m.SentAt, Receives: m.Receives}
			switch q.kind {
			case chunkMessages:
				var c message.ChunkMessage
				if json.Unmarshal([]byte(m.Body), &c) != nil || c.RetailerID == "" {
					continue
				}
				d := base
				d.RetailerID, d.Generation, d.Seq, d.Chunk = c.RetailerID, c.Generation, c.Seq, c
				out = append(out, d)
			case s3Events:
				var ev lambdaevents.S3Event
				if json.Unmarshal([]byte(m.Body), &ev) != nil {
					continue
				}
				for _, rec := range ev.Records {
					r, gen, err := keys.ParseUpload(rec.S3.Object.Key)
					if err != nil {
						continue
					}
					d := base
					d.RetailerID, d.Generation = r, gen
					out = append(out, d)
				}
			}
		}
	}
	return out, nil
}

// of returns the dead letters of one upload.
func deadLettersOf(all []deadLetter, retailerID string, gen int64) []deadLetter {
	var out []deadLetter
	for _, d := range all {
		if d.RetailerID == retailerID && d.Generation == gen {
			out = append(out, d)
		}
	}
	return out
}
