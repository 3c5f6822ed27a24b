package inmem

import (
	"context"
	"fmt"
)

// versionKey is one product of one retailer for one consumer.
type versionKey struct{ consumer, retailerID, productID string }

// AdvanceVersions records, for products of a retailer, the generation of
// the change consumer is about to write where it is higher than the
// recorded one, calling write with that report first (without the store's
// lock); when write fails nothing is recorded. Unlike pgstore's, two
// concurrent calls for one product may both be told it is newer.
func (s *Store) AdvanceVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64,
	write func(newer []bool) error) error {
	if len(productIDs) != len(generations) {
		return fmt.Errorf("advance versions: %d products, %d generations", len(productIDs), len(generations))
	}
	s.mu.Lock()
	if _, err := s.registered(retailerID); err != nil {
		s.mu.Unlock()
		return err
	}
	newer := make([]bool, len(productIDs))
	for i, id := range productIDs {
		newer[i] = generations[i] > s.versions[versionKey{consumer, retailerID, id}]
	}
	s.mu.Unlock()
	if err := write(newer); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.versions == nil {
		s.versions = map[versionKey]int64{}
	}
	for i, id := range productIDs {
		k := versionKey{consumer, retailerID, id}
		s.versions[k] = max(s.versions[k], generations[i])
	}
	return nil
}
