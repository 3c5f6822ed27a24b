package apiclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// Problems streams every problem of generation gen (GET
// .../snapshots/{gen}/problems, JSON Lines) to w as the API sends it: a
// file over 5 MB from the presigned URL the API redirects to (303),
// fetched without the token.
func (c *Client) Problems(ctx context.Context, token, retailerID string, gen int64, w io.Writer) error {
	path := fmt.Sprintf("/v1/retailers/%s/snapshots/%d/problems", url.PathEscape(retailerID), gen)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.BaseURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return newAPIError(resp.StatusCode, data)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("read problems of %s generation %d: %w", retailerID, gen, err)
	}
	return nil
}
