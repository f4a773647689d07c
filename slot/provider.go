package slot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/walrelay/walrelay/internal/check"
)

// provider is who runs the server, as far as the role can tell: a managed
// provider's roles, settings and functions show it (docs/MANAGED.md cites
// where each provider documents them). An unknown server is self-managed,
// and the fixes then speak of postgresql.conf, ALTER ROLE and restarts.
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

// providerFacts are what the role can read of the provider: which of
// providerRoleNames exist (with whether the role is a member of each),
// the provider settings pg_settings shows it, and whether Aurora's
// aurora_version() exists.
type providerFacts struct {
	roles    map[string]bool
	settings map[string]string
	aurora   bool
}

// The signals, each documented by its provider (docs/MANAGED.md).
var (
	providerRoleNames = []string{"rds_superuser", "rds_replication", "cloudsqlsuperuser", "azure_pg_admin", "supabase_admin", "neon_superuser"}
	// providerSettingPrefixes are the provider-owned setting namespaces.
	providerSettingPrefixes = []string{"rds.", "cloudsql.", "azure.", "neon."}
)

// providerSQL reads the signals in one statement: pg_settings lists only
// what the role may see, so a hidden setting is absent, not an error.
const providerSQL = `SELECT
	coalesce((SELECT array_agg(rolname::text ORDER BY rolname) FROM pg_roles WHERE rolname = ANY($1)), '{}'),
	coalesce((SELECT array_agg(pg_has_role(current_user, oid, 'MEMBER') ORDER BY rolname) FROM pg_roles WHERE rolname = ANY($1)), '{}'),
	coalesce((SELECT array_agg(name ORDER BY name) FROM pg_settings WHERE split_part(name, '.', 1) || '.' = ANY($2)), '{}'),
	coalesce((SELECT array_agg(setting ORDER BY name) FROM pg_settings WHERE split_part(name, '.', 1) || '.' = ANY($2)), '{}'),
	to_regproc('aurora_version') IS NOT NULL`

func readProviderFacts(ctx context.Context, conn *pgx.Conn) (providerFacts, error) {
	var roles, names, values []string
	var member []bool
	pf := providerFacts{roles: map[string]bool{}, settings: map[string]string{}}
	err := conn.QueryRow(ctx, providerSQL, providerRoleNames, providerSettingPrefixes).Scan(&roles, &member, &names, &values, &pf.aurora)
	if err != nil {
		return pf, fmt.Errorf("read the provider's roles and settings: %w", err)
	}
	for i, r := range roles {
		pf.roles[r] = member[i]
	}
	for i, n := range names {
		pf.settings[n] = values[i]
	}
	return pf, nil
}

// detect names the provider and the signal that showed it.
func (pf providerFacts) detect() (provider, string) {
	role := func(name string) bool { _, ok := pf.roles[name]; return ok }
	setting := func(prefix string) string {
		for _, n := range slices.Sorted(maps.Keys(pf.settings)) {
			if strings.HasPrefix(n, prefix) {
				return n
			}
		}
		return ""
	}
	switch {
	case pf.aurora:
		return aurora, "function aurora_version()"
	case role("rds_superuser"):
		return rds, "role rds_superuser"
	case setting("rds.") != "":
		return rds, "setting " + setting("rds.")
	case role("cloudsqlsuperuser"):
		return cloudSQL, "role cloudsqlsuperuser"
	case setting("cloudsql.") != "":
		return cloudSQL, "setting " + setting("cloudsql.")
	case role("azure_pg_admin"):
		return azure, "role azure_pg_admin"
	case setting("azure.") != "":
		return azure, "setting " + setting("azure.")
	case role("supabase_admin"):
		return supabase, "role supabase_admin"
	case role("neon_superuser"):
		return neon, "role neon_superuser"
	case setting("neon.") != "":
		return neon, "setting " + setting("neon.")
	}
	return selfManaged, ""
}

// DetectProvider names who runs the server conn is on, as its roles,
// settings and functions show, with the signal that showed it ("" for a
// self-managed server): what `walrelay status` prints.
func DetectProvider(ctx context.Context, conn *pgx.Conn) (name, evidence string, err error) {
	pf, err := readProviderFacts(ctx, conn)
	if err != nil {
		return "", "", err
	}
	p, ev := pf.detect()
	return p.String(), ev, nil
}

// providerRule says which provider check found, and by what.
func providerRule(f *facts) []check.Result {
	const name = "postgres provider"
	if f.providerErr != nil {
		return one(unreadable(name, f.providerErr))
	}
	if f.provider == selfManaged {
		return one(check.Pass(name, "self-managed (no managed provider's roles or settings visible)"))
	}
	return one(check.Pass(name, fmt.Sprintf("%s (%s)", f.provider, f.providerEvidence)))
}

// directEndpoint is where the provider's direct endpoint is, for a
// provider that puts a pooler or proxy in front of its users (a sentence
// with a leading space), else "".
func (p provider) directEndpoint() string {
	switch p {
	case supabase:
		return " On Supabase: the direct connection, db.<project-ref>.supabase.co:5432 (replication does not work through Supavisor or the dedicated pooler)."
	case neon:
		return " On Neon: the connection string without -pooler in its host name."
	case azure:
		return " On Azure: the server's port 5432, not the built-in PgBouncer's 6432."
	case rds, aurora:
		return " On " + p.String() + ": the instance's (Aurora: the cluster's writer) endpoint, not an RDS Proxy's, which does not carry replication."
	}
	return ""
}

// setFix is how a setting is changed on the provider's servers, as a
// sentence: restart says the server must restart for it.
func (p provider) setFix(name, value string, restart bool) string {
	then := ""
	switch p {
	case rds:
		if restart {
			then = " and reboot the instance"
		}
		return fmt.Sprintf("Set %s = %s in the instance's DB parameter group%s.", name, value, then)
	case aurora:
		if restart {
			then = " and reboot the writer instance"
		}
		return fmt.Sprintf("Set %s = %s in the DB cluster parameter group%s.", name, value, then)
	case cloudSQL:
		if restart {
			then = "; the instance restarts"
		}
		return fmt.Sprintf("Set the database flag %s = %s (console, or gcloud sql instances patch INSTANCE --database-flags=%s=%s)%s.", name, value, name, value, then)
	case azure:
		if restart {
			then = ", then save and restart the server"
		}
		return fmt.Sprintf("Set the server parameter %s = %s (portal: Server parameters, or az postgres flexible-server parameter set)%s.", name, value, then)
	}
	if restart {
		then = " and restart the server"
	} else {
		then = " and reload the configuration"
	}
	return fmt.Sprintf("Set %s = %s (postgresql.conf or ALTER SYSTEM)%s.", name, value, then)
}

// walLevelFix is how the provider turns logical decoding on.
func (p provider) walLevelFix() string {
	switch p {
	case rds, aurora:
		return p.setFix("rds.logical_replication", "1", true) + " It is a static parameter; wal_level shows logical after the reboot."
	case cloudSQL:
		return p.setFix("cloudsql.logical_decoding", "on", true) + " Cloud SQL has no wal_level to set."
	case azure:
		return p.setFix("wal_level", "logical", true)
	case supabase:
		return "Supabase sets the WAL up for replication itself: point the URL at the project's direct connection, db.<project-ref>.supabase.co:5432."
	case neon:
		return "In the Neon Console: the project's Settings, Logical Replication, Enable. It cannot be turned off again and restarts the project's computes."
	}
	return p.setFix("wal_level", "logical", true)
}

// capacityFix is how the provider gives more of max_replication_slots or
// max_wal_senders.
func (p provider) capacityFix(name string) string {
	switch p {
	case supabase:
		return "On Supabase the compute size sets " + name + " (5 up to Medium, 8 on Large, 24 on XL, 80 from 2XL): drop an unused slot or pick a larger compute."
	case neon:
		return "On Neon " + name + " is 10 and only Neon's support changes it: drop an unused slot, or ask them."
	}
	return "Drop an unused one, or raise it: " + p.setFix(name, "<more>", true)
}

// keepSizeFix is how the provider bounds the WAL a slot keeps, or, where
// the provider fixes it or documents no way to set it, what to watch
// instead.
func (p provider) keepSizeFix() string {
	const watch = "alert on wal_status (WalrelaySlotWALUnreserved) and walrelay_slot_retained_wal_bytes (WalrelaySlotLagGrowing), which walrelay exports"
	switch p {
	case azure:
		return "Azure fixes max_slot_wal_keep_size at -1 (its only allowed value) and drops an unused logical slot when storage runs low: " + watch + ", watch the server's storage, and keep walrelay running."
	case neon:
		return "Neon's documentation gives no way to set max_slot_wal_keep_size: " + watch + "."
	case supabase:
		return "Size max_slot_wal_keep_size for the longest lag walrelay may have, as Supabase's replication FAQ advises, and " + watch + "."
	case rds, aurora, cloudSQL:
		return "Where the provider offers max_slot_wal_keep_size: " + p.setFix("max_slot_wal_keep_size", "<what the storage can spare, e.g. 10GB>", false) + " Either way, " + watch + "."
	}
	return p.setFix("max_slot_wal_keep_size", "<what the WAL disk can spare, e.g. 10GB>", false) + " Then " + watch + "."
}

// replicationFix is how the role gets the right to replicate on the
// provider's servers.
func (p provider) replicationFix(quoted string) string {
	switch p {
	case cloudSQL:
		return fmt.Sprintf("As a cloudsqlsuperuser member (the postgres user): ALTER USER %s WITH REPLICATION. Logical decoding also needs the flag cloudsql.logical_decoding = on.", quoted)
	case azure:
		return fmt.Sprintf("As the server admin (a member of azure_pg_admin): ALTER ROLE %s WITH REPLICATION.", quoted)
	case supabase:
		return fmt.Sprintf("As postgres: ALTER ROLE %s WITH REPLICATION (PostgreSQL 17 and later; before 17 only postgres itself may replicate on Supabase: connect as postgres).", quoted)
	case neon:
		return "On Neon a role made with SQL cannot be given REPLICATION: use a role created in the Neon Console, CLI or API (a member of neon_superuser, which has REPLICATION)."
	}
	return fmt.Sprintf("As a superuser: ALTER ROLE %s REPLICATION.", quoted)
}

// hazardRule warns of what the provider documents doing to logical slots
// that walrelay cannot see coming: removing them, or losing them on a
// failover or an upgrade. Each warning says what the provider's
// documentation says to do (docs/MANAGED.md cites it).
func hazardRule(f *facts) []check.Result {
	const name = "provider slots"
	v := f.server.versionNum
	switch f.provider {
	case neon:
		return one(check.Warning(name, "Neon removes inactive replication slots (after about 40 hours, its logical replication guide says) and a branch restore deletes its slots",
			"Keep walrelay running (a confirming slot is not inactive); alert on WalrelayAbsent and WalrelaySlotLost, and after a removed slot run `walrelay recover --since TIME`."))
	case azure:
		if v < failoverVersion {
			return one(check.Warning(name, "Azure keeps no logical slot across a high-availability failover on PostgreSQL 16 and earlier, and drops an unused slot when storage runs low",
				"With HA, install the pg_failover_slots extension and set hot_standby_feedback = on, as Azure's logical replication guide says, or run `walrelay recover` after a failover; keep walrelay running."))
		}
		return one(check.Warning(name, "Azure drops an unused logical slot when storage runs low; on PostgreSQL 17 and later a failover keeps the slot only when it is synced",
			"With HA, set sync_replication_slots = on and hot_standby_feedback = on (see the slot failover check); keep walrelay running."))
	case rds, aurora:
		found := fmt.Sprintf("%s: a major version upgrade from PostgreSQL 16 or earlier needs every logical slot dropped first", f.provider)
		fix := "Before such an upgrade, stop walrelay and drop its slot; afterwards run `walrelay recover --since TIME` (docs/MANAGED.md)."
		if f.provider == rds && v >= failoverVersion {
			fix += " For a failover to keep the slot, RDS for PostgreSQL 17 syncs failover slots to a standby (sync_replication_slots = 1, hot_standby_feedback = 1, synchronized_standby_slots)."
		}
		return one(check.Warning(name, found, fix))
	case cloudSQL:
		return one(check.Warning(name, "Cloud SQL keeps a logical slot across a disaster-recovery switchover only as a logical failover slot (PostgreSQL 17 and later, Enterprise Plus)",
			"Plan for `walrelay recover --since TIME` after a failover or switchover unless the slot is a logical failover slot."))
	}
	return nil
}

// keepBytes is a max_slot_wal_keep_size as current_setting shows it
// ("512MB", "10GB", "-1") in bytes; -1 for unlimited or unreadable.
func keepBytes(s string) int64 {
	units := []struct {
		suffix string
		n      int64
	}{{"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"kB", 1 << 10}}
	for _, u := range units {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(num, 10, 64)
			if err != nil || v < 0 {
				return -1
			}
			return v * u.n
		}
	}
	return -1
}
