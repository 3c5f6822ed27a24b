package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/functions/adapters/rdsca"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// migrateTimeout bounds one schema deployment (the custom resource answers
// CloudFormation before it ends, see infra/migrate/lambda).
const migrateTimeout = 5 * time.Minute

// newSchema deploys the migrations of sql/ with a custom resource backed by
// the migrate function (infra/migrate/lambda). Its properties change, and
// so CloudFormation runs it again, when a migration file or the shard count
// changes.
func newSchema(scope constructs.Construct, d functionDeps) (awslambda.Function, awscdk.CustomResource) {
	var shardRefs []string
	for _, s := range d.dbs.shards {
		shardRefs = append(shardRefs, s.ref())
	}
	// The master user, from its secret (the only function that reads it),
	// verifying the writers against the CA bundle shipped in the zip. The
	// 0050 and 0051 migrations make the functions' roles, grant them rds_iam
	// and their privileges.
	env := map[string]string{
		EnvControlDB:     d.dbs.control.ref(),
		EnvShardDBs:      strings.Join(shardRefs, ","),
		EnvDBMaxConns:    "1",
		EnvDBSSLRootCert: rdsca.LambdaPath,
	}
	fn := newFunction(scope, d, fnSpec{
		id: "Migrate", asset: "migrate", memoryMB: 256, timeout: migrateTimeout,
		description: "catalog migrate: applies sql/ migrations to the control and shard databases (deploy time)",
		env:         env,
	})
	for _, c := range d.dbs.all() {
		c.secret.GrantRead(fn.Role(), nil)
	}
	cr := awscdk.NewCustomResource(scope, jsii.String("Schema"), &awscdk.CustomResourceProps{
		ServiceToken: fn.FunctionArn(),
		ResourceType: jsii.String("Custom::CatalogSchema"),
		Properties: &map[string]any{
			"MigrationsHash": MigrationsHash(),
			"Shards":         strconv.Itoa(len(d.dbs.shards)),
		},
	})
	// The databases must be up (writers included) before the migrations.
	for _, c := range d.dbs.all() {
		cr.Node().AddDependency(c.cluster)
	}
	return fn, cr
}

// MigrationsHash is a digest of every migration file embedded by package sql.
func MigrationsHash() string {
	h := sha256.New()
	for _, part := range []struct {
		name string
		fsys fs.FS
	}{{"control", catalogsql.Control}, {"shard", catalogsql.Shard}} {
		_ = fs.WalkDir(part.fsys, ".", func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			body, err := fs.ReadFile(part.fsys, path)
			if err != nil {
				return err
			}
			h.Write([]byte(part.name + "/" + path + "\x00"))
			h.Write(body)
			h.Write([]byte{0})
			return nil
		})
	}
	return hex.EncodeToString(h.Sum(nil))
}
