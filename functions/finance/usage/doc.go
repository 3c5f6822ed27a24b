// Package usage is the usage counters of DESIGN 10: what one retailer used
// on one UTC day (uploads, rows, chunks, database writes, reads, S3, SQS and
// SNS requests, Lambda time per function), as metering counts it, the
// adapters store it and the cost report (package costs) prices it. It is a
// leaf: it imports only the standard library, so that what meters usage
// does not depend on the finance code that renders it.
package usage
