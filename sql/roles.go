package sql

// Database roles, one per function, made by migration 0050 (sql/roles) in both
// databases and granted by 0051 only the privileges each function's queries need
// (docs/DEPLOY.md, "Database roles"). On AWS each function logs in as its
// role with IAM authentication; migrate alone uses the master user.
const (
	RoleUpload    = "catalog_upload"    // upload: registry, reservations, status, confirm
	RoleDiff      = "catalog_diff"      // diff: the fence and generation states, no catalog rows
	RoleApply     = "catalog_apply"     // apply-small and apply-large: fenced catalog writes, no DDL, no DELETE
	RoleRead      = "catalog_read"      // read: SELECT on the storefront's tables only, read-only sessions
	RoleRelay     = "catalog_relay"     // relay: publishes and deletes outbox rows
	RoleConsumers = "catalog_consumers" // consumers: no catalog table
	RoleOps       = "catalog_ops"       // ops: reads everything, repairs with fenced writes
)

// FunctionRoles lists every role above.
var FunctionRoles = []string{RoleUpload, RoleDiff, RoleApply, RoleRead, RoleRelay, RoleConsumers, RoleOps}
