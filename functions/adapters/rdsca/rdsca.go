// Package rdsca holds the certificate authorities of Amazon RDS and RDS
// Proxy (rds-ca-bundle.pem; its source and licence in README.md), which the
// functions verify the database servers' certificates against on AWS.
// scripts/buildlambdas puts the bundle into every Lambda zip at ZipPath; the
// CDK app points the functions at LambdaPath.
package rdsca

import _ "embed"

// Bundle is the PEM bundle.
//
//go:embed rds-ca-bundle.pem
var Bundle []byte

// ZipPath is where the bundle sits inside a Lambda zip.
const ZipPath = "certs/rds-ca-bundle.pem"

// LambdaPath is where a function finds it: Lambda unpacks the zip into
// /var/task (LAMBDA_TASK_ROOT).
const LambdaPath = "/var/task/" + ZipPath
