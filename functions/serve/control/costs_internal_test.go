package control

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// A report under MaxInlineReportBytes whose body, escaped into the Lambda
// proxy response, would pass what the response holds is linked, not
// answered: 5,000,000 bytes of JSON that is a third quotes is 6.7 MB
// escaped.
func TestQuoteHeavyReportIsLinked(t *testing.T) {
	t.Parallel()
	plain := bytes.Repeat([]byte("a1,"), 5_000_000/3)
	quoted := bytes.Repeat([]byte(`"a"`), 5_000_000/3)
	require.Less(t, len(quoted), MaxInlineReportBytes)
	require.Greater(t, httpapi.LambdaStringBytes(quoted), httpapi.MaxLambdaBodyBytes)
	require.True(t, reportFitsInline(plain, MaxInlineReportBytes))
	require.False(t, reportFitsInline(quoted, MaxInlineReportBytes))
	require.False(t, reportFitsInline(plain, 1000), "over the limit")
}
