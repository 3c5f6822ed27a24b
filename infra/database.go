package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsrds"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Database settings shared by the control and shard clusters.
const (
	dbName              = "catalog"
	dbMasterUser        = "catalog_admin"
	backupRetentionDays = 14
	rotationDays        = 30
	proxyIdleClientMins = 30
	dbLogsRetention     = awslogs.RetentionDays_ONE_MONTH
	secretRefPrefix     = "secret:" // CATALOG_*_DB values: resolve the DSN from this secret
	maxRDSName          = 63
)

// dbCluster is one Aurora PostgreSQL cluster with what the functions need
// to reach it.
type dbCluster struct {
	cluster awsrds.DatabaseCluster
	secret  awssecretsmanager.ISecret
	// writer and reader are the cluster endpoints (reader = writer when
	// the cluster has no readers).
	writer, reader string
	// proxyWriter and proxyReader are the RDS Proxy endpoints ("" without a
	// proxy; proxyReader = proxyWriter when there are no readers).
	proxyWriter, proxyReader string
	// proxy (nil without) authenticates clients and itself with IAM
	// (end-to-end IAM authentication) under proxyRole.
	proxy     awsrds.DatabaseProxy
	proxyRole awsiam.Role
}

// ref is the CATALOG_*_DB value of the cluster for its master user: the
// migrate function's alone.
func (c *dbCluster) ref() string { return secretRefPrefix + *c.secret.SecretArn() }

// dsn is the CATALOG_*_DB value of a function connecting to host (an
// endpoint of this cluster or of its proxy): the user, verify-full TLS and
// IAM authentication come from CATALOG_DB_USER, CATALOG_DB_SSLROOTCERT and
// CATALOG_DB_IAM_AUTH.
func dsn(host string) string { return fmt.Sprintf("postgres://%s:%d/%s", host, postgres, dbName) }

// grantConnect lets fn log in as the database role dbRole with IAM
// authentication: to the proxy when viaProxy and the cluster has one (and
// the proxy, in turn, to the cluster as that role), else to the cluster.
func (c *dbCluster) grantConnect(fn awslambda.Function, dbRole string, viaProxy bool) {
	if viaProxy && c.proxy != nil {
		c.proxy.GrantConnect(fn, jsii.String(dbRole))
		c.cluster.GrantConnect(c.proxyRole, jsii.String(dbRole))
		return
	}
	c.cluster.GrantConnect(fn, jsii.String(dbRole))
}

// databases is the control cluster and the shard clusters, shard 0 first.
type databases struct {
	control *dbCluster
	shards  []*dbCluster
}

// all returns the control cluster then the shards.
func (d *databases) all() []*dbCluster { return append([]*dbCluster{d.control}, d.shards...) }

func newDatabases(scope constructs.Construct, stackName string, net *network, p Params) *databases {
	d := &databases{control: newDBCluster(scope, stackName, "Control", net, p)}
	for i := range p.Shards {
		d.shards = append(d.shards, newDBCluster(scope, stackName, fmt.Sprintf("Shard%d", i), net, p))
	}
	return d
}

func newDBCluster(scope constructs.Construct, stackName, id string, net *network, p Params) *dbCluster {
	var readers []awsrds.IClusterInstance
	for i := range p.ReadersPerShard {
		readers = append(readers, awsrds.ClusterInstance_ServerlessV2(jsii.String(fmt.Sprintf("reader%d", i+1)), &awsrds.ServerlessV2ClusterInstanceProps{
			// The first reader is the failover target: keep it sized like the
			// writer (promotion tier 0-1); the others scale on their own load.
			ScaleWithWriter:           jsii.Bool(i == 0),
			EnablePerformanceInsights: jsii.Bool(true),
			PubliclyAccessible:        jsii.Bool(false),
		}))
	}
	cluster := awsrds.NewDatabaseCluster(scope, jsii.String(id+"Cluster"), &awsrds.DatabaseClusterProps{
		Engine: awsrds.DatabaseClusterEngine_AuroraPostgres(&awsrds.AuroraPostgresClusterEngineProps{
			Version: awsrds.AuroraPostgresEngineVersion_VER_16_9(),
		}),
		Writer: awsrds.ClusterInstance_ServerlessV2(jsii.String("writer"), &awsrds.ServerlessV2ClusterInstanceProps{
			EnablePerformanceInsights: jsii.Bool(true),
			PubliclyAccessible:        jsii.Bool(false),
		}),
		Readers:                 &readers,
		ServerlessV2MinCapacity: jsii.Number(p.MinACU),
		ServerlessV2MaxCapacity: jsii.Number(p.MaxACU),
		Vpc:                     net.vpc,
		VpcSubnets:              net.dataSubnets,
		SecurityGroups:          &[]awsec2.ISecurityGroup{net.dbSG},
		// Named, so that endpoints and secret ARNs have a known length (they
		// fill the functions' 4 KB of environment, one per shard).
		ClusterIdentifier: jsii.String(physicalName(stackName, id)),
		// A generated secret holds host, port, username, password and dbname
		// once attached: the JSON the functions resolve DSNs from.
		Credentials: awsrds.Credentials_FromGeneratedSecret(jsii.String(dbMasterUser), &awsrds.CredentialsBaseOptions{
			SecretName: jsii.String(stackName + "/" + strings.ToLower(id) + "/master"),
		}),
		DefaultDatabaseName: jsii.String(dbName),
		Port:                jsii.Number(postgres),
		StorageEncrypted:    jsii.Bool(true),
		DeletionProtection:  jsii.Bool(true),
		RemovalPolicy:       awscdk.RemovalPolicy_SNAPSHOT,
		CopyTagsToSnapshot:  jsii.Bool(true),
		Backup: &awsrds.BackupProps{
			Retention: awscdk.Duration_Days(jsii.Number(backupRetentionDays)),
		},
		IamAuthentication:          jsii.Bool(true),
		CloudwatchLogsExports:      jsii.Strings("postgresql"),
		CloudwatchLogsRetention:    dbLogsRetention,
		AutoMinorVersionUpgrade:    jsii.Bool(true),
		Parameters:                 &map[string]*string{"rds.force_ssl": jsii.String("1")},
		PreferredMaintenanceWindow: jsii.String("sun:10:00-sun:11:00"),
	})
	// Single-user rotation through the Secrets Manager VPC endpoint (there
	// is no NAT). Functions re-read the secret when authentication fails.
	cluster.AddRotationSingleUser(&awsrds.RotationSingleUserOptions{
		AutomaticallyAfter: awscdk.Duration_Days(jsii.Number(rotationDays)),
		Endpoint:           net.secretsManager,
		VpcSubnets:         net.appSubnets,
		SecurityGroup:      net.rotationSG,
	})

	c := &dbCluster{
		cluster: cluster,
		secret:  cluster.Secret(),
		writer:  *cluster.ClusterEndpoint().Hostname(),
		reader:  *cluster.ClusterEndpoint().Hostname(),
	}
	if p.ReadersPerShard > 0 {
		c.reader = *cluster.ClusterReadEndpoint().Hostname()
	}
	if p.RDSProxy {
		// End-to-end IAM authentication: functions log in to the proxy as
		// their database role with an IAM token, and the proxy logs in to
		// the cluster as the same role with its own (grantConnect gives it
		// exactly the roles that come through it). No password anywhere.
		c.proxyRole = awsiam.NewRole(scope, jsii.String(id+"ProxyRole"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("rds.amazonaws.com"), nil),
			Description: jsii.String("RDS Proxy of the " + strings.ToLower(id) + " cluster: IAM logins to the cluster as the roles of the functions it serves"),
		})
		proxy := cluster.AddProxy(jsii.String("Proxy"), &awsrds.DatabaseProxyOptions{
			DbProxyName:               jsii.String(physicalName(stackName, id+"-proxy")),
			Vpc:                       net.vpc,
			VpcSubnets:                net.dataSubnets,
			SecurityGroups:            &[]awsec2.ISecurityGroup{net.proxySG},
			DefaultAuthScheme:         awsrds.DefaultAuthScheme_IAM_AUTH,
			Role:                      c.proxyRole,
			RequireTLS:                jsii.Bool(true),
			MaxConnectionsPercent:     jsii.Number(proxyMaxConnectionsPercent),
			MaxIdleConnectionsPercent: jsii.Number(proxyMaxConnectionsPercent / 4),
			IdleClientTimeout:         awscdk.Duration_Minutes(jsii.Number(proxyIdleClientMins)),
			DebugLogging:              jsii.Bool(false),
		})
		c.proxy = proxy
		c.proxyWriter = *proxy.Endpoint()
		c.proxyReader = c.proxyWriter
		if p.ReadersPerShard > 0 {
			ro := proxy.AddEndpoint(jsii.String("ReadOnly"), &awsrds.DatabaseProxyEndpointOptions{
				Vpc:                 net.vpc,
				VpcSubnets:          net.dataSubnets,
				SecurityGroups:      &[]awsec2.ISecurityGroup{net.proxySG},
				TargetRole:          awsrds.ProxyEndpointTargetRole_READ_ONLY,
				DbProxyEndpointName: jsii.String(physicalName(stackName, id+"-ro")),
			})
			c.proxyReader = *ro.Endpoint()
		}
	}
	return c
}

// physicalName is a name unique per stack that fits the rules of RDS
// identifiers (letters, digits, single hyphens, starts with a letter, at
// most 63): "<stack>-<part>", lowercased; a long stack name is cut and
// completed with a hash of the whole name.
func physicalName(stackName, part string) string {
	suffix := "-" + sanitizeName(part)
	prefix := sanitizeName(stackName)
	if prefix == "" || prefix[0] < 'a' || prefix[0] > 'z' {
		prefix = "p" + prefix
	}
	if len(prefix)+len(suffix) > maxRDSName {
		sum := sha256.Sum256([]byte(stackName))
		keep := maxRDSName - len(suffix) - 9
		prefix = strings.TrimRight(prefix[:keep], "-") + "-" + hex.EncodeToString(sum[:4])
	}
	return prefix + suffix
}

// sanitizeName lowercases s and keeps letters and digits, joining runs of
// anything else into single hyphens.
func sanitizeName(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.TrimRight(b.String(), "-")
}
