package costs

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// CSVColumns are the columns of the CSV report, exactly as DESIGN 10 names them.
var CSVColumns = []string{
	"date", "retailer_id", "uploads", "rows_received", "rows_changed", "reads", "lambda_gb_s",
	"lambda_requests", "s3_requests", "sqs_requests", "sns_requests", "db_rows_written",
	"variable_usd", "shared_usd", "total_usd", "full_rewrite_usd", "saving_ratio",
}

// Record is the row as CSV fields, in CSVColumns order: counts as
// integers, GB-seconds to the millisecond-MB (3 decimals), dollars to
// 6 decimals, the ratio to 4.
func (r Row) Record() []string {
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	usd := func(f float64) string { return strconv.FormatFloat(f, 'f', 6, 64) }
	u := r.Usage
	return []string{
		r.Date, r.RetailerID, i(u.Uploads), i(u.RowsReceived), i(u.RowsChanged()), i(u.Reads),
		strconv.FormatFloat(lambdaGBs(u, ""), 'f', 3, 64), i(lambdaRequests(u, "")), i(u.S3Requests()),
		i(u.SQSRequests()), i(u.SNSPublishes), i(u.DBRowsWritten),
		usd(r.VariableUSD), usd(r.SharedUSD), usd(r.TotalUSD), usd(r.FullRewriteUSD),
		strconv.FormatFloat(r.SavingRatio, 'f', 4, 64),
	}
}

// WriteCSV writes the report's rows (header first), one per retailer-day,
// ordered by date then retailer_id.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVColumns); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for _, row := range r.Rows {
		if err := cw.Write(row.Record()); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// WriteJSON writes the whole report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}
