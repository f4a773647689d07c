package slot

// provider is who runs the server, as far as the role can tell: a managed
// provider's roles and settings show it. An unknown server is
// self-managed, and the fixes then speak of postgresql.conf, ALTER ROLE
// and restarts.
type provider int

const (
	selfManaged provider = iota
	rds
	aurora
	cloudSQL
	azure
	supabase
	neon
)

func (p provider) String() string {
	return [...]string{"self-managed", "Amazon RDS", "Amazon Aurora", "Google Cloud SQL", "Azure Database for PostgreSQL flexible server", "Supabase", "Neon"}[p]
}

// directEndpoint is, for a provider with a pooler in front of its users,
// where its direct endpoint is (a sentence with a leading space), else "".
func (p provider) directEndpoint() string {
	switch p {
	case supabase:
		return " On Supabase: the direct connection, db.<project-ref>.supabase.co:5432, or the pooler's session mode (port 5432)."
	case neon:
		return " On Neon: the connection string without -pooler in its host name."
	case azure:
		return " On Azure: the server's port 5432, not the built-in PgBouncer's 6432."
	}
	return ""
}
