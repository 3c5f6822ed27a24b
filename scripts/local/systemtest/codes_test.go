package systemtest_test

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../../.."

// statusErrorCodes are the codes of an upload's error (status.error.code)
// as the code lists them: the reader's problems, the holds, an upload that
// can no longer be read, and one the pipeline could not finish.
func statusErrorCodes() []string {
	codes := slices.Concat(snapshot.Codes, catalog.HoldCodes, catalog.UploadCodes, catalog.FailureCodes)
	slices.Sort(codes)
	return slices.Compact(codes)
}

// The lists of upload codes (snapshot.Codes, catalog.HoldCodes,
// catalog.UploadCodes, catalog.FailureCodes) hold every code the source
// declares or writes.
func TestUploadCodeListsAreComplete(t *testing.T) {
	t.Parallel()
	require.Equal(t, systemtest.FindCodes(t, repoRoot).Status, statusErrorCodes(),
		"upload error codes in the source vs snapshot.Codes + catalog.HoldCodes + catalog.UploadCodes + catalog.FailureCodes")
}

// docs/openapi.yaml enumerates exactly the codes the source can emit: the
// Error schema's error.code the API's, the Status schema's error.code the
// upload codes, and its problems' code those of a rejection (no holds); and
// the Status schema's state is one of catalog.States.
func TestOpenAPIEnumeratesEveryErrorCode(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	require.NoError(t, err)
	enum := func(schema *openapi3.Schema, path ...string) []string {
		for _, p := range path {
			if p == "[]" {
				schema = schema.Items.Value
				continue
			}
			require.Contains(t, schema.Properties, p, "docs/openapi.yaml: %v", path)
			schema = schema.Properties[p].Value
		}
		var out []string
		for _, v := range schema.Enum {
			out = append(out, v.(string))
		}
		slices.Sort(out)
		return out
	}
	codes := systemtest.FindCodes(t, repoRoot)
	schemas := doc.Components.Schemas
	require.Equal(t, codes.API, enum(schemas["Error"].Value, "error", "code"),
		"API error codes in the source vs the Error schema's error.code enum in docs/openapi.yaml")
	require.Equal(t, codes.Status, enum(schemas["Status"].Value, "error", "code"),
		"upload error codes in the source vs the Status schema's error.code enum in docs/openapi.yaml")
	var rejections []string
	for _, c := range codes.Status {
		if !slices.Contains(catalog.HoldCodes, c) {
			rejections = append(rejections, c)
		}
	}
	require.Equal(t, rejections, enum(schemas["Status"].Value, "error", "problems", "[]", "code"),
		"rejection codes vs the Status schema's error.problems[].code enum in docs/openapi.yaml")
	require.Equal(t, stateNames(), enum(schemas["Status"].Value, "state"),
		"catalog.States vs the Status schema's state enum in docs/openapi.yaml")
}

// Every operation of docs/openapi.yaml documents the request id header on
// each of its answers and API Gateway's own errors as its default answer,
// so that a route added later cannot leave them out.
func TestOpenAPIDocumentsRequestIDsAndGatewayErrors(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	require.NoError(t, err)
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			def := op.Responses.Default()
			if def == nil || def.Ref != "#/components/responses/Gateway" {
				t.Errorf("%s %s: no default: { $ref: \"#/components/responses/Gateway\" } (API Gateway's own errors)", method, path)
			}
			for status, resp := range op.Responses.Map() {
				if status == "default" {
					continue
				}
				if h := resp.Value.Headers["X-Request-Id"]; h == nil || h.Ref != "#/components/headers/RequestID" {
					t.Errorf("%s %s %s: no X-Request-Id: { $ref: \"#/components/headers/RequestID\" } header", method, path, status)
				}
			}
		}
	}
}
