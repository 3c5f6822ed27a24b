package main

import (
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// S3 key prefixes of the catalog bucket (DESIGN 2 and 7).
const (
	prefixSnapshots = "snapshots/"
	prefixIndexes   = "indexes/"
	prefixChunks    = "chunks/"
	// prefixChanges holds the change objects that change events refer to
	// (DESIGN 8, written by the relay's side of the apply).
	prefixChanges = "changes/"
	// prefixProblems holds every problem of a generation the diff read
	// (keys.Problems, DESIGN 13), kept as long as uploads.
	prefixProblems = "problems/"
	// prefixPlans holds the plans of previewed and held generations
	// (DESIGN 13, keys.PlanIndex), kept as long as an upload.
	prefixPlans = "plans/"
	// prefixReports holds cost reports too large for an API answer
	// (upload.ReportPrefix), linked from a 303 for 15 minutes.
	prefixReports = "reports/costs/"
	// reportDays is how long a stored report is kept.
	reportDays = 1
)

// Lifecycle settings of the catalog bucket.
const (
	// claimCheckDays is how long chunk objects (the claim checks of apply
	// messages), change objects (of change events) and superseded indexes
	// are kept: longer than any message that refers to them can still be
	// delivered. A message can wait out its queue's retention, then, moved
	// to its DLQ, the DLQ's (a FIFO DLQ restarts the clock), so queue + DLQ
	// retention, and a day for a redrive to run: 4 + 14 + 1 = 19 days.
	// TestClaimChecksOutliveTheirMessages compares it with every queue.
	claimCheckDays = int((queueRetention+dlqRetention)/(24*time.Hour)) + 1
	// supersededTagKey/Value mark an index older than its retailer's
	// applied baseline, which no diff reads again; the diff sets the tag (it
	// holds s3:PutObjectTagging on indexes/*). Untagged indexes are kept, so
	// a retailer's baseline can never expire under it.
	supersededTagKey   = keys.SupersededTagKey
	supersededTagValue = keys.SupersededTagValue
	// supersededIndexDays is how long a superseded index stays readable:
	// as long as a redriven diff job of its generation may arrive.
	supersededIndexDays = claimCheckDays
	// accessLogRetentionDays is how long access and flow logs are kept.
	accessLogRetentionDays = 90
)

// storage is the catalog bucket and the bucket its access logs go to.
type storage struct {
	bucket     awss3.Bucket
	logsBucket awss3.Bucket
}

func newStorage(scope constructs.Construct, p Params) *storage {
	logs := awss3.NewBucket(scope, jsii.String("AccessLogsBucket"), &awss3.BucketProps{
		Encryption:        awss3.BucketEncryption_S3_MANAGED, // log delivery cannot write SSE-KMS targets
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:        jsii.Bool(true),
		MinimumTLSVersion: jsii.Number(1.2),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-logs"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(accessLogRetentionDays)),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
	})

	bucket := awss3.NewBucket(scope, jsii.String("CatalogBucket"), &awss3.BucketProps{
		Encryption:             awss3.BucketEncryption_S3_MANAGED,
		BucketKeyEnabled:       jsii.Bool(true),
		BlockPublicAccess:      awss3.BlockPublicAccess_BLOCK_ALL(),
		EnforceSSL:             jsii.Bool(true),
		MinimumTLSVersion:      jsii.Number(1.2),
		ObjectOwnership:        awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		ServerAccessLogsBucket: logs,
		ServerAccessLogsPrefix: jsii.String("catalog-bucket/"),
		RemovalPolicy:          awscdk.RemovalPolicy_RETAIN,
		LifecycleRules: &[]*awss3.LifecycleRule{
			{
				// An upload is kept UploadRetentionDays after it was made once
				// the diff has tagged it retired: no longer the content of
				// the applied generation (an undo reads that one, I10). The
				// applied generation's upload, and any newer one, is kept.
				Id:         jsii.String("expire-uploads"),
				Prefix:     jsii.String(prefixSnapshots),
				TagFilters: &map[string]any{supersededTagKey: supersededTagValue},
				Expiration: awscdk.Duration_Days(jsii.Number(float64(p.UploadRetentionDays))),
			},
			{
				// A generation's problems file is kept as long as its upload
				// (DESIGN 13): then the problems route answers 409.
				Id:         jsii.String("expire-problems"),
				Prefix:     jsii.String(prefixProblems),
				Expiration: awscdk.Duration_Days(jsii.Number(float64(p.UploadRetentionDays))),
			},
			{
				Id:         jsii.String("expire-superseded-indexes"),
				Prefix:     jsii.String(prefixIndexes),
				TagFilters: &map[string]any{supersededTagKey: supersededTagValue},
				Expiration: awscdk.Duration_Days(jsii.Number(supersededIndexDays)),
			},
			{
				Id:         jsii.String("expire-chunks"),
				Prefix:     jsii.String(prefixChunks),
				Expiration: awscdk.Duration_Days(jsii.Number(claimCheckDays)),
			},
			{
				Id:         jsii.String("expire-changes"),
				Prefix:     jsii.String(prefixChanges),
				Expiration: awscdk.Duration_Days(jsii.Number(claimCheckDays)),
			},
			{
				// A plan is kept as long as its generation's upload (DESIGN 13).
				Id:         jsii.String("expire-plans"),
				Prefix:     jsii.String(prefixPlans),
				Expiration: awscdk.Duration_Days(jsii.Number(float64(p.UploadRetentionDays))),
			},
			{
				Id:         jsii.String("expire-reports"),
				Prefix:     jsii.String(prefixReports),
				Expiration: awscdk.Duration_Days(jsii.Number(reportDays)),
			},
			analyticsTieringRule(), // analytics/: the change events' Parquet files (events.go)
			{
				Id:                                  jsii.String("abort-incomplete-multipart"),
				AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
			},
		},
	})
	return &storage{bucket: bucket, logsBucket: logs}
}
