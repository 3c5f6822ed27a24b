//go:build !linux

package main

import (
	"context"
	"errors"

	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func benchReadLambda(context.Context, *stack.Stack, string, []readRetailer, lambdaOptions) error {
	return errors.New("read --lambda: Linux only (the emulator runs Lambda's Linux runtime API)")
}
