package inmem_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/ports/topic/topictest"
)

// The in-memory topic keeps the contract the SNS adapter keeps.
func TestTopicContract(t *testing.T) {
	t.Parallel()
	topictest.Run(t, func(t *testing.T) topictest.Harness {
		tp := inmem.NewTopic()
		return topictest.Harness{Publisher: tp, Receive: func(t *testing.T, want int) []topic.Message { return tp.Take() }}
	})
}
