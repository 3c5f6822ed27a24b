package main

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/functions/adapters/rdsca"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// dbUserARN is the rendered IAM resource of database role dbRole on a
// cluster (by construct id, "Shard0Cluster"), or on its proxy.
func dbUserARN(t *testing.T, r *synthResult, cluster, dbRole string, viaProxy bool) string {
	t.Helper()
	prefix := "arn:${AWS::Partition}:rds-db:${AWS::Region}:${AWS::AccountId}:dbuser:"
	if viaProxy {
		proxy := r.logicalID(t, "AWS::RDS::DBProxy", cluster+"Proxy")
		return prefix + `{"Fn::Select":[6,{"Fn::Split":[":",{"Fn::GetAtt":["` + proxy + `","DBProxyArn"]}]}]}/` + dbRole
	}
	return prefix + "${" + r.logicalID(t, "AWS::RDS::DBCluster", cluster) + ".DBClusterResourceId}/" + dbRole
}

// grantsByRole returns, for every IAM role of the template, the rendered
// "Effect action resource" lines of the policies attached to it (managed
// policies aside: aws-cdk-lib's own custom resources have
// AWSLambdaBasicExecutionRole, which holds no database or secret action).
func (r *synthResult) grantsByRole(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for id := range r.resources("AWS::IAM::Role") {
		out[id] = grants(r.policyStatements(t, id))
	}
	return out
}

// TestDatabaseAccess: every function logs in to every database as its own
// role, with IAM authentication and verify-full TLS against the bundle in
// its zip; its execution role may connect as that role only, on exactly
// the clusters (or proxies) it is pointed at; no function but migrate can
// read a cluster's master secret; each proxy logs in to its cluster as the
// roles of the functions it serves and nothing else.
func TestDatabaseAccess(t *testing.T) {
	if rdsca.LambdaPath != "/var/task/"+rdsca.ZipPath {
		t.Fatalf("the bundle path %s is not where Lambda unpacks %s", rdsca.LambdaPath, rdsca.ZipPath)
	}
	for _, overrides := range []map[string]any{nil, scaled} {
		r := synth(t, overrides)
		t.Run(fmt.Sprintf("proxy=%v", r.params.RDSProxy), func(t *testing.T) {
			clusters := []string{"ControlCluster"}
			for i := range r.params.Shards {
				clusters = append(clusters, fmt.Sprintf("Shard%dCluster", i))
			}
			byRole := r.grantsByRole(t)
			fnRoles := map[string]bool{}
			for name, spec := range map[string]struct {
				dbRole   string
				viaProxy bool
			}{
				"upload":      {catalogsql.RoleUpload, true},
				"read":        {catalogsql.RoleRead, true},
				"diff":        {catalogsql.RoleDiff, false},
				"apply-small": {catalogsql.RoleApply, false},
				"apply-large": {catalogsql.RoleApply, false},
				"relay":       {catalogsql.RoleRelay, false},
				"analytics":   {catalogsql.RoleConsumers, false},
				"webhooks":    {catalogsql.RoleConsumers, false},
				"ops":         {catalogsql.RoleOps, false},
			} {
				fn := r.function(t, name)
				fnRoles[r.roleOf(t, fn)] = true
				env := r.env(t, fn)
				equal(t, name+" database user", env[EnvDBUser], spec.dbRole)
				equal(t, name+" IAM authentication", env[EnvDBIAMAuth], "true")
				equal(t, name+" CA bundle", env[EnvDBSSLRootCert], rdsca.LambdaPath)
				for _, k := range []string{EnvControlDB, EnvShardDBs} {
					for _, dsn := range strings.Split(env[k], ",") {
						if !strings.HasPrefix(dsn, "postgres://${") || strings.Contains(dsn, "@") || strings.Contains(dsn, "?") {
							t.Errorf("%s %s: %q is not a bare postgres:// address (no secret, user, password or TLS override)", name, k, dsn)
						}
					}
				}
				viaProxy := spec.viaProxy && r.params.RDSProxy
				var want []string
				for _, c := range clusters {
					want = append(want, "Allow rds-db:connect "+dbUserARN(t, r, c, spec.dbRole, viaProxy))
				}
				var got []string
				for _, g := range byRole[r.roleOf(t, fn)] {
					if strings.Contains(g, "rds-db:") || strings.Contains(g, "rds:") {
						got = append(got, g)
					}
				}
				equalLines(t, name+" database logins", got, want)
			}

			// The master secrets: migrate reads them; no function does.
			migrateRole := r.roleOf(t, r.function(t, "migrate"))
			master := map[string]bool{}
			for id := range r.resources("AWS::SecretsManager::SecretTargetAttachment") {
				master["${"+id+"}"] = true
			}
			if len(master) != len(clusters) {
				t.Fatalf("want one master secret per cluster, got %d", len(master))
			}
			readers := map[string]int{}
			for role, lines := range byRole {
				for _, g := range lines {
					f := strings.Fields(g)
					if f[1] == "secretsmanager:GetSecretValue" && master[f[2]] {
						readers[role]++
					}
				}
				if fnRoles[role] {
					for _, g := range lines {
						if strings.HasPrefix(strings.Fields(g)[1], "secretsmanager:") && master[strings.Fields(g)[2]] {
							t.Errorf("function role %s has %s", role, g)
						}
					}
				}
			}
			equal(t, "master secret readers", readers, map[string]int{migrateRole: len(clusters)})

			// The proxies: end-to-end IAM, no secret, TLS; their roles log in
			// as upload's and read's roles on their own cluster only.
			proxies := r.resources("AWS::RDS::DBProxy")
			if !r.params.RDSProxy {
				equal(t, "proxies", len(proxies), 0)
				return
			}
			equal(t, "proxies", len(proxies), len(clusters))
			for _, c := range clusters {
				proxy := r.logicalID(t, "AWS::RDS::DBProxy", c+"Proxy")
				props := r.props(t, proxy)
				equal(t, c+" proxy auth scheme", props["DefaultAuthScheme"], "IAM_AUTH")
				equal(t, c+" proxy secrets", props["Auth"], nil)
				equal(t, c+" proxy TLS", props["RequireTLS"], true)
				role := strings.TrimSuffix(strings.TrimPrefix(render(props["RoleArn"]), "${"), ".Arn}")
				var want []string
				for _, dbRole := range []string{catalogsql.RoleUpload, catalogsql.RoleRead} {
					want = append(want, "Allow rds-db:connect "+dbUserARN(t, r, c, dbRole, false))
				}
				sort.Strings(want)
				equalLines(t, c+" proxy role", byRole[role], want)
			}
		})
	}
}
