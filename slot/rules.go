package slot

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/walrelay/walrelay/decoder"
	"github.com/walrelay/walrelay/internal/bytesize"
	"github.com/walrelay/walrelay/internal/check"
	"github.com/walrelay/walrelay/schema"
)

// minServerVersion is the oldest PostgreSQL walrelay supports, as
// server_version_num.
const minServerVersion = 140000

// A rule judges one part of the setup from the facts: zero or more results,
// in the order `walrelay check` prints them. A rule never reads the server;
// a fact it needs that could not be read is a failure saying so.
type rule func(*facts) []check.Result

// The rules are in groups, in the order walrelay needs things: `walrelay
// init` creates the publication between the table's group and the
// publication's, and the slot between the publication's and the slot's;
// `walrelay recover` replaces the slot while its recovery is pending, so
// that group comes before the slot's, and a slot missing or lost during a
// recovery is refused with the recovery's words. Together they are the one
// list of what walrelay needs of PostgreSQL: Check reports all of it, a
// preflight refuses on its first failure.
var (
	versionRules     = []rule{versionRule, primaryRule, providerRule}
	settingRules     = []rule{walLevelRule, slotsRule, sendersRule, keepSizeRule, idleTimeoutRule, hazardRule}
	roleRules        = []rule{replicationRule, replicationURLRule, sessionRule, connectRule}
	tableRules       = []rule{forEachTable(tableRule, columnsRule)}
	publicationRules = []rule{publicationRule, creatorRule, insertsRule, forEachTable(coversRule, partitionsRule), scopeRule}
	recoveryRules    = []rule{recoveryRule}
	slotRules        = []rule{slotRule, pluginRule, databaseRule, walStatusRule, invalidatedRule, lagRule}
	failoverRules    = []rule{failoverRule, syncStandbySlotsRule}
)

// serverRules are every group before the publication's.
func serverRules() [][]rule { return [][]rule{versionRules, settingRules, roleRules, tableRules} }

// allRules is the whole list, in order.
func allRules() [][]rule {
	return append(serverRules(), publicationRules, recoveryRules, slotRules, failoverRules)
}

// forEachTable is a rule of the slot's outbox tables: rules judge the
// first table's facts, then each other table's (facts.others), whose
// results name their table when there are several.
func forEachTable(rules ...rule) rule {
	return func(f *facts) []check.Result {
		var out []check.Result
		for _, tf := range append([]*facts{f}, f.others...) {
			for _, r := range rules {
				for _, res := range r(tf) {
					if len(f.others) > 0 {
						res.Name += " " + tf.cfg.Table.String()
					}
					out = append(out, res)
				}
			}
		}
		return out
	}
}

// judge applies the groups of rules to f, in order.
func judge(f *facts, groups ...[]rule) []check.Result {
	var out []check.Result
	for _, g := range groups {
		for _, r := range g {
			out = append(out, r(f)...)
		}
	}
	return out
}

func one(r check.Result) []check.Result { return []check.Result{r} }

// unreadable is the result of a check whose facts could not be read.
func unreadable(name string, err error) check.Result {
	return check.Failure(name, "cannot read: "+err.Error(),
		"Fix the cause in the error; the checks read pg_settings, pg_roles, pg_class, pg_attribute, pg_publication and pg_replication_slots.")
}

func versionRule(f *facts) []check.Result {
	const name = "server version"
	switch {
	case f.serverErr != nil:
		return one(unreadable(name, f.serverErr))
	case f.server.versionNum < minServerVersion:
		return one(check.Failure(name, "PostgreSQL "+f.server.version+"; walrelay needs 14 or newer", "Upgrade the server to PostgreSQL 14 or newer."))
	}
	return one(check.Pass(name, "PostgreSQL "+f.server.version))
}

func walLevelRule(f *facts) []check.Result {
	const name = "wal_level"
	switch {
	case f.settingsErr != nil:
		return one(unreadable(name, f.settingsErr))
	case f.settings.walLevel == "logical":
		return one(check.Pass(name, "logical"))
	}
	return one(check.Failure(name, f.settings.walLevel+"; logical decoding needs logical",
		f.provider.walLevelFix()))
}

// slotsRule judges max_replication_slots. An unreadable slot counts as
// missing: the warning then errs on the side of saying more.
func slotsRule(f *facts) []check.Result {
	const name = "max_replication_slots"
	if f.settingsErr != nil {
		return one(unreadable(name, f.settingsErr))
	}
	s, slot := f.settings, f.cfg.Slot
	found := fmt.Sprintf("%d, %d in use", s.maxSlots, s.slotsUsed)
	switch {
	case s.maxSlots == 0:
		return one(check.Failure(name, found, f.provider.setFix("max_replication_slots", "1 or more (one per walrelay slot)", true)))
	case f.figuresErr == nil && f.figures.Exists:
		return one(check.Pass(name, found+fmt.Sprintf(", slot %q among them", slot)))
	case s.slotsUsed >= s.maxSlots:
		return one(check.Warning(name, found+fmt.Sprintf(": none left for slot %q, which does not exist yet", slot),
			f.provider.capacityFix("max_replication_slots")+" Then `walrelay init`."))
	}
	return one(check.Pass(name, found))
}

// sendersRule judges max_wal_senders. An unreadable slot counts as
// inactive.
func sendersRule(f *facts) []check.Result {
	const name = "max_wal_senders"
	if f.settingsErr != nil {
		return one(unreadable(name, f.settingsErr))
	}
	s := f.settings
	found := fmt.Sprintf("%d, %d in use", s.maxSenders, s.sendersUsed)
	switch {
	case s.maxSenders == 0:
		return one(check.Failure(name, found, f.provider.setFix("max_wal_senders", "1 or more (one per streaming walrelay)", true)))
	case f.figuresErr == nil && f.figures.Active:
		return one(check.Pass(name, found+", one of them streams from the slot"))
	case s.sendersUsed >= s.maxSenders:
		return one(check.Warning(name, found+": none left for walrelay to stream",
			"Stop an unused replication client. "+f.provider.capacityFix("max_wal_senders")))
	}
	return one(check.Pass(name, found))
}

func keepSizeRule(f *facts) []check.Result {
	const name = "max_slot_wal_keep_size"
	keep := f.settings.keepSize
	switch {
	case f.settingsErr != nil:
		return one(unreadable(name, f.settingsErr))
	case keep == nil:
		return one(check.Warning(name, "not supported by this server: the WAL kept for a slot is unlimited",
			"Upgrade the server to PostgreSQL 14 or newer and set max_slot_wal_keep_size."))
	case *keep == "-1":
		return one(check.Warning(name, "-1 (unlimited): a stuck slot keeps WAL until the disk is full", f.provider.keepSizeFix()))
	case keepBytes(*keep) > 0 && keepBytes(*keep) < 1<<30:
		return one(check.Warning(name, *keep+": a slot more than this behind loses the WAL it needs, and walrelay then has to recover",
			"Size it for the longest outage of walrelay or Kafka you would sit out (the WAL the database writes in that time), and alert on wal_status, which walrelay exports (WalrelaySlotWALUnreserved)."))
	}
	return one(check.Pass(name, *keep))
}

func replicationRule(f *facts) []check.Result {
	const name = "role replication"
	user := f.server.user
	switch {
	case f.roleErr != nil:
		return one(unreadable(name, f.roleErr))
	case f.role.probeErr == nil && f.role.super:
		return one(check.Warning(name, fmt.Sprintf("role %s runs as superuser", user),
			"Use a role with REPLICATION only (owning the outbox table for `walrelay init`), not a superuser."))
	case f.role.probeErr == nil:
		return one(check.Pass(name, fmt.Sprintf("role %s opens replication connections (%s)", user, f.role.grantedBy())))
	case pooledRefusal(f.role.probeErr):
		return one(check.Failure(name,
			fmt.Sprintf("the replication connection to %s was refused by a connection pooler: %s", f.cfg.hostPort(f.cfg.replicationURL()), oneLineText(f.role.probeErr)),
			"Point "+SettingReplicationConnString+" at the database's direct endpoint, which carries the replication stream; "+
				SettingConnString+" may stay on the pooler for walrelay's SQL."+f.provider.directEndpoint()))
	}
	found := fmt.Sprintf("role %s cannot open a replication connection (%s): %s", user, f.role.grantedBy(), oneLineText(f.role.probeErr))
	return one(check.Failure(name, found, f.role.replicationFix(user, f.provider)))
}

// grantedBy says what of the role would let it replicate.
func (r roleFacts) grantedBy() string {
	var by []string
	if r.super {
		by = append(by, "superuser")
	}
	if r.replication {
		by = append(by, "REPLICATION")
	}
	for _, p := range providerReplicationRoles {
		if r.providerRoles[p] {
			by = append(by, "member of "+p)
		}
	}
	if len(by) == 0 {
		return "neither REPLICATION nor superuser"
	}
	return strings.Join(by, ", ")
}

// replicationFix is how the role gets the right to replicate on the server
// it is on: a managed server's own way where its roles show it (an RDS
// user cannot ALTER ROLE ... REPLICATION), else the attribute; and when
// the role has the right already, the server refused for another reason,
// which its error says.
func (r roleFacts) replicationFix(user string, p provider) string {
	quoted := schema.QuoteIdentifier(user)
	if member, rds := r.providerRoles["rds_replication"]; rds {
		if !member {
			return fmt.Sprintf("As the master user (rds_superuser): GRANT rds_replication TO %s. Logical replication also needs rds.logical_replication = 1 in the instance's (Aurora: the cluster's) parameter group, applied by a reboot.", quoted)
		}
		return "The role is a member of rds_replication: set rds.logical_replication = 1 in the instance's (Aurora: the cluster's) parameter group and reboot, or fix the cause in the error."
	}
	if r.super || r.replication {
		return "The role may replicate, and the server refused the connection: fix the cause in the error (pg_hba.conf needs a line for the replication pseudo-database that admits this role, or max_wal_senders is used up)."
	}
	return p.replicationFix(quoted)
}

func connectRule(f *facts) []check.Result {
	const name = "database connect"
	user, db := f.server.user, f.server.database
	switch {
	case f.roleErr != nil:
		return one(unreadable(name, f.roleErr))
	case f.role.connect:
		return one(check.Pass(name, fmt.Sprintf("role %s may connect to database %s", user, db)))
	}
	return one(check.Failure(name, fmt.Sprintf("role %s has no CONNECT on database %s", user, db),
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s.", schema.QuoteIdentifier(db), schema.QuoteIdentifier(user))))
}

func tableRule(f *facts) []check.Result {
	const name = "outbox table"
	t := f.cfg.Table
	switch {
	case f.tableErr != nil:
		return one(unreadable(name, f.tableErr))
	case f.tableExists:
		return one(check.Pass(name, t.String()+" exists"))
	}
	return one(check.Failure(name, t.String()+" does not exist",
		"Create it with the DDL that `walrelay schema` prints, or point "+SettingTable+" at the outbox table."))
}

// columnsRule judges the table's columns as the decoder will
// (decoder.CheckColumns): a required column missing, or of a type the
// decoder cannot read, fails with the column and the setting to change;
// optional columns absent pass, saying so. Nothing when the table is
// missing: tableRule says that.
func columnsRule(f *facts) []check.Result {
	const name = "table columns"
	switch {
	case f.tableErr != nil || !f.tableExists:
		return nil
	case f.columnsErr != nil:
		return one(unreadable(name, f.columnsErr))
	}
	dc := f.cfg.decoderConfig()
	if e := decoder.CheckColumns(dc, f.columns); e != nil {
		return one(check.Failure(name, e.Found(), e.Fix()+"."))
	}
	return one(check.Pass(name, columnsFound(dc, f.columns)))
}

// columnsFound says what a table that passes lacks: the optional columns
// absent, and the aggregate type that stands in for its column.
func columnsFound(dc decoder.Config, cols []decoder.Column) string {
	names := dc.Columns.Names()
	var absent []string
	aggType := ""
	for _, fld := range decoder.AbsentColumns(dc, cols) {
		if fld == schema.FieldAggregateType {
			aggType = fmt.Sprintf("; no column %q: every row's aggregate type is %q (%s)", names[fld], dc.AggregateTypeDefault, decoder.SettingAggregateTypeDefault)
			continue
		}
		absent = append(absent, strconv.Quote(names[fld]))
	}
	if ct := dc.ContentTypeColumn; ct != "" && !slices.ContainsFunc(cols, func(c decoder.Column) bool { return c.Name == ct }) {
		absent = append(absent, strconv.Quote(ct))
	}
	found := "the configured columns, of types walrelay reads"
	if len(absent) > 0 {
		found = "the required columns, of types walrelay reads; absent, read as null: " + strings.Join(absent, ", ")
	}
	return found + aggType
}

// publicationRule reports whether the publication exists; the other
// publication rules say nothing when it cannot be read or is missing.
func publicationRule(f *facts) []check.Result {
	const name = "publication"
	switch {
	case f.pubErr != nil:
		return one(unreadable(name, f.pubErr))
	case !f.pub.Exists:
		return one(check.Failure(name, fmt.Sprintf("publication %q does not exist", f.cfg.Publication),
			"Run `walrelay init`, which creates it insert-only for the outbox table."))
	}
	return one(check.Pass(name, fmt.Sprintf("publication %q exists", f.cfg.Publication)))
}

// creatorRule reports, for a missing publication of an existing table,
// whether the role could create it: CREATE on the database and owning the
// table (or superuser), as CREATE PUBLICATION requires.
func creatorRule(f *facts) []check.Result {
	const name = "publication create"
	if !f.creatorSet {
		return nil
	}
	if f.creatorErr != nil {
		return one(unreadable(name, f.creatorErr))
	}
	c, user, t := f.creator, f.server.user, f.cfg.Table
	ddl := schema.CreatePublicationSQL(schema.Config{Table: t, Publication: f.cfg.Publication})
	switch {
	case f.role.super || c.owns && c.create:
		return one(check.Pass(name, fmt.Sprintf("role %s may create it: `walrelay init` can", user)))
	case !c.owns:
		return one(check.Failure(name, fmt.Sprintf("role %s may not create it: it does not own %s (%s does), and CREATE PUBLICATION takes owning the table", user, t, c.owner),
			fmt.Sprintf("Have %s run: %s; then run `walrelay init` again.", c.owner, ddl)))
	}
	return one(check.Failure(name, fmt.Sprintf("role %s may not create it: it has no CREATE on database %s, which CREATE PUBLICATION takes", user, f.server.database),
		fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s, or have the table's owner run: %s; then run `walrelay init` again.",
			schema.QuoteIdentifier(f.server.database), schema.QuoteIdentifier(user), ddl)))
}

func insertsRule(f *facts) []check.Result {
	const name = "publication inserts"
	if f.pubErr != nil || !f.pub.Exists {
		return nil
	}
	if f.pub.Insert {
		return one(check.Pass(name, "publishes inserts"))
	}
	pub := f.cfg.Publication
	return one(check.Failure(name, fmt.Sprintf("publication %q does not publish inserts", pub),
		fmt.Sprintf("ALTER PUBLICATION %s SET (publish = 'insert').", schema.QuoteIdentifier(pub))))
}

func coversRule(f *facts) []check.Result {
	const name = "publication table"
	if f.pubErr != nil || !f.pub.Exists {
		return nil
	}
	pub, t := f.cfg.Publication, f.cfg.Table
	switch {
	case f.pub.Covers(t):
		return one(check.Pass(name, "includes "+t.String()))
	case len(f.partitions) > 0 && slices.ContainsFunc(f.pub.Tables, func(pt schema.Table) bool { return slices.Contains(f.partitions, pt) }):
		return nil // it lists t's partitions in t's place: partitionsRule says so
	}
	return one(check.Failure(name, fmt.Sprintf("publication %q does not include table %s", pub, t),
		fmt.Sprintf("ALTER PUBLICATION %s ADD TABLE %s.", schema.QuoteIdentifier(pub), t.Quoted())))
}

// partitionsRule judges a partitioned outbox table's publication: without
// publish_via_partition_root the server publishes each row as its
// partition's, a table walrelay does not relay, so rows would be skipped;
// with it, every partition's rows (those attached later included) arrive
// as the table's own. Nothing for a plain table.
func partitionsRule(f *facts) []check.Result {
	const name = "publication partitions"
	if f.pubErr != nil || !f.pub.Exists || len(f.partitions) == 0 {
		return nil
	}
	pub, t, n := f.cfg.Publication, f.cfg.Table, len(f.partitions)
	if f.pub.ViaRoot {
		return one(check.Pass(name, fmt.Sprintf("%s is partitioned (%d partitions); publish_via_partition_root publishes their rows as its own", t, n)))
	}
	return one(check.Failure(name,
		fmt.Sprintf("%s is partitioned (%d partitions) and publication %q publishes each row as its partition's (publish_via_partition_root is off): walrelay relays %s only", t, n, pub, t),
		fmt.Sprintf("ALTER PUBLICATION %s SET (publish_via_partition_root = true).", schema.QuoteIdentifier(pub))))
}

// scopeRule warns when the publication publishes more than the outbox
// inserts: walrelay skips the rest, but the server decodes and sends it.
func scopeRule(f *facts) []check.Result {
	const name = "publication scope"
	if f.pubErr != nil || !f.pub.Exists {
		return nil
	}
	p, pub := f.pub, f.cfg.Publication
	var names, quoted []string
	for _, tf := range append([]*facts{f}, f.others...) {
		names, quoted = append(names, tf.cfg.Table.String()), append(quoted, tf.cfg.Table.Quoted())
	}
	more := p.extras(f.outboxTables())
	if len(more) == 0 {
		return one(check.Pass(name, "inserts into "+strings.Join(names, ", ")+" only"))
	}
	fix := fmt.Sprintf("ALTER PUBLICATION %[1]s SET (publish = 'insert'), then ALTER PUBLICATION %[1]s SET TABLE %[2]s.",
		schema.QuoteIdentifier(pub), strings.Join(quoted, ", "))
	if p.AllTables {
		fix = "It works as it is; narrowing a FOR ALL TABLES publication takes a new one FOR TABLE " + strings.Join(quoted, ", ") +
			" WITH (publish = 'insert', publish_via_partition_root = true) and a new slot, switched to only once the old slot has caught up."
	}
	return one(check.Warning(name, fmt.Sprintf("publication %q also publishes %s", pub, strings.Join(more, ", ")), fix))
}

// recoveryRule refuses a slot whose recovery (`walrelay recover`) is
// pending: the slot may be one the recovery created before it published
// the rows committed before the slot's consistent point, which must reach
// Kafka before anything the slot streams; or the recovery stopped before
// it replaced a lost slot. A recoveries table that cannot be read is a
// failure saying so, never "none pending".
func recoveryRule(f *facts) []check.Result {
	const name = "recovery"
	r := f.recovery
	switch {
	case f.recoveryErr != nil:
		return one(check.Failure(name, "cannot read: "+f.recoveryErr.Error(),
			"Fix the cause in the error; walrelay's role needs SELECT on "+f.cfg.Recoveries.String()+", which "+schema.GrantsForRole+" grants."))
	case !f.recoveryFound:
		return one(check.Pass(name, "none pending"))
	case !r.Pending():
		return one(check.Pass(name, "none pending (the last finished at "+utc(*r.FinishedAt)+")"))
	}
	return one(check.Failure(name, "a "+r.String()+" is pending",
		"Run `walrelay recover` again to finish it; walrelay will not stream before that."))
}

// slotRule reports whether the slot exists; the other slot rules say
// nothing when it cannot be read or is missing.
// slotRuleName names the rule that fails exactly when the slot is missing.
const slotRuleName = "slot"

// The rules that fail a slot the server invalidated (IsSlotGone).
const (
	walStatusRuleName   = "slot wal_status"
	invalidatedRuleName = "slot invalidated"
)

func slotRule(f *facts) []check.Result {
	const name = slotRuleName
	s, fig := f.cfg.Slot, f.figures
	switch {
	case f.figuresErr != nil:
		return one(unreadable(name, f.figuresErr))
	case !fig.Exists:
		return one(check.Failure(name, fmt.Sprintf("slot %q does not exist", s),
			"Run `walrelay init`, which creates it after the publication. If walrelay streamed from this database before "+
				"(the slot was dropped or lost, or a standby without it was promoted), a new slot starts at the current position "+
				"and skips what was committed since: run `walrelay recover --since TIME` instead ("+lostSlotProcedure+")."))
	case fig.Active:
		return one(check.Pass(name, fmt.Sprintf("slot %q exists, in use by pid %d", s, fig.ActivePID)))
	}
	return one(check.Pass(name, fmt.Sprintf("slot %q exists, not in use", s)))
}

// slotExists is the condition of the rules after slotRule.
func (f *facts) slotExists() bool { return f.figuresErr == nil && f.figures.Exists }

func pluginRule(f *facts) []check.Result {
	const name = "slot plugin"
	if !f.slotExists() {
		return nil
	}
	fig := f.figures
	if fig.Type == "logical" && fig.Plugin == "pgoutput" {
		return one(check.Pass(name, "logical, pgoutput"))
	}
	return one(check.Failure(name, fmt.Sprintf("slot %q is a %s slot with plugin %q; walrelay needs a logical pgoutput slot", f.cfg.Slot, fig.Type, fig.Plugin),
		"Leave this slot to its client and give walrelay its own "+SettingSlot+", created by `walrelay init`."))
}

func databaseRule(f *facts) []check.Result {
	const name = "slot database"
	if !f.slotExists() {
		return nil
	}
	s, have, want := f.cfg.Slot, f.figures.Database, f.server.database
	if have == want {
		return one(check.Pass(name, want))
	}
	belongs := fmt.Sprintf("slot %q belongs to database %q, not %q", s, have, want)
	if have == "" {
		belongs = fmt.Sprintf("slot %q belongs to no database, not to %q", s, want)
	}
	return one(check.Failure(name, belongs,
		"Point "+SettingConnString+" at the slot's database, or give walrelay its own "+SettingSlot+" for this one."))
}

func walStatusRule(f *facts) []check.Result {
	const name = walStatusRuleName
	if !f.slotExists() {
		return nil
	}
	fig := f.figures
	found := fig.WALStatus
	if fig.SafeWALSize != nil {
		found += fmt.Sprintf(", safe_wal_size %s", bytesize.Format(*fig.SafeWALSize))
	}
	switch fig.WALStatus {
	case "reserved", "extended":
		return one(check.Pass(name, found))
	case "unreserved":
		return one(check.Warning(name, found+": the server will remove WAL the slot still needs at its next checkpoint",
			"Get walrelay streaming and confirming now, or raise max_slot_wal_keep_size, before the slot is lost."))
	case "lost":
		return one(check.Failure(name, fmt.Sprintf("lost: the server removed WAL slot %q needed, so outbox messages may never have been published", f.cfg.Slot),
			"Run `walrelay recover --since TIME`, TIME being when walrelay last confirmed ("+lostSlotProcedure+"); never `walrelay init` on top of it."))
	}
	return one(check.Warning(name, fmt.Sprintf("%q: the slot holds no WAL", fig.WALStatus),
		"Drop the slot and run `walrelay init` once you know nothing needs its position."))
}

// lagRule is information: how much WAL the slot has not confirmed. A slot
// without a confirmed position cannot decode at all.
func lagRule(f *facts) []check.Result {
	const name = "slot lag"
	if !f.slotExists() {
		return nil
	}
	fig := f.figures
	if fig.ConfirmedFlush == 0 {
		return one(check.Failure(name, "no confirmed_flush_lsn: the slot is not usable for logical decoding",
			"Drop the slot and run `walrelay init` once you know nothing needs it."))
	}
	return one(check.Pass(name, fmt.Sprintf("%s (%d bytes) of WAL not confirmed: confirmed_flush_lsn %s, server at %s",
		bytesize.Format(int64(fig.LagBytes())), fig.LagBytes(), fig.ConfirmedFlush, fig.CurrentWAL)))
}

// primaryRule refuses a standby: walrelay writes on the server it streams
// from (the dead-letter table, heartbeats, the leader's lock), and a
// standby accepts no writes. A slot on a standby (PostgreSQL 16 and later
// can decode there) would also be lost with the standby's promotion
// unless it is a synced copy of the primary's.
func primaryRule(f *facts) []check.Result {
	const name = "server role"
	switch {
	case f.haErr != nil:
		return one(unreadable(name, f.haErr))
	case f.ha.inRecovery:
		return one(check.Failure(name, "a standby (in recovery): walrelay streams from the primary, where it writes the dead-letter table, heartbeats and its leader lock",
			"Point "+SettingConnString+" at the primary, or list every server with target_session_attrs=read-write so that walrelay follows the primary through a failover."))
	}
	standbys := ""
	switch n := f.ha.standbys; {
	case n == 1:
		standbys = ", with 1 standby streaming"
	case n > 1:
		standbys = fmt.Sprintf(", with %d standbys streaming", n)
	}
	return one(check.Pass(name, "primary"+standbys))
}

// invalidatedRule fails a slot the server invalidated (PostgreSQL 16 and
// later say so beside wal_status): it decodes no more.
func invalidatedRule(f *facts) []check.Result {
	const name = invalidatedRuleName
	if !f.slotExists() {
		return nil
	}
	fig := f.figures
	why := fig.InvalidationReason
	if why == "" && fig.Conflicting {
		why = "a conflict with recovery"
	}
	if why == "" {
		return nil
	}
	return one(check.Failure(name, fmt.Sprintf("slot %q was invalidated (%s): it decodes no more, and the messages committed since its confirmed position %s are not published", f.cfg.Slot, why, fig.ConfirmedFlush),
		"Run `walrelay recover --since TIME`, TIME being when walrelay last confirmed ("+lostSlotProcedure+"); never `walrelay init` on top of it."))
}

// lostSlotProcedure is where an operator learns to close the gap a lost
// slot leaves.
const lostSlotProcedure = "docs/RUNBOOK.md, WalrelaySlotLost"

// idleTimeoutRule reports idle_replication_slot_timeout (PostgreSQL 18):
// a slot no one streams from for that long is invalidated, so a walrelay
// stopped longer loses its slot.
func idleTimeoutRule(f *facts) []check.Result {
	const name = "idle_replication_slot_timeout"
	t := f.ha.idleTimeout
	switch {
	case f.haErr != nil || t == nil:
		return nil
	case *t == "0":
		return one(check.Pass(name, "0 (slots are never invalidated for being idle)"))
	}
	return one(check.Warning(name, fmt.Sprintf("%s: a walrelay stopped longer than this loses slot %q", *t, f.cfg.Slot),
		"Set idle_replication_slot_timeout = 0, or longer than the longest outage of walrelay you would sit out, and alert on walrelay_leader."))
}

// failoverRule says whether the slot survives a failover: on PostgreSQL 17
// and later a failover slot does, on standbys that synchronise it; before
// 17 no logical slot does.
func failoverRule(f *facts) []check.Result {
	const name = "slot failover"
	if !f.slotExists() || f.haErr != nil || f.ha.inRecovery || f.figures.Type != "logical" {
		return nil
	}
	s := f.cfg.Slot
	if f.server.versionNum < failoverVersion {
		if f.ha.standbys == 0 {
			return nil
		}
		return one(check.Warning(name, fmt.Sprintf("PostgreSQL %s has no failover slots: a standby promoted in a failover will not have slot %q", f.server.version, s),
			"Upgrade to PostgreSQL 17 or newer for failover slots; until then a failover takes `walrelay recover` on the new primary ("+lostSlotProcedure+")."))
	}
	if f.figures.Failover {
		return one(check.Pass(name, fmt.Sprintf("slot %q is a failover slot: standbys with sync_replication_slots = on keep it", s)))
	}
	return one(check.Warning(name, fmt.Sprintf("slot %q is not a failover slot: a standby promoted in a failover will not have it", s),
		fmt.Sprintf("With walrelay stopped, on a replication connection (psql \"dbname=%s replication=database\"): ALTER_REPLICATION_SLOT %s (FAILOVER true); walrelay never recreates a slot.",
			f.server.database, schema.QuoteIdentifier(s))))
}

// syncStandbySlotsRule reports synchronized_standby_slots (PostgreSQL 17
// and later): without it a failover slot can confirm WAL a standby does
// not have yet, so walrelay may publish a message that a promoted standby
// never had (the reverse of loss). Each slot it names must exist, or
// logical decoding waits for it.
func syncStandbySlotsRule(f *facts) []check.Result {
	const name = "synchronized_standby_slots"
	v := f.ha.syncStandbySlots
	if !f.slotExists() || f.haErr != nil || f.ha.inRecovery || v == nil || !f.figures.Failover ||
		f.ha.standbys == 0 && len(f.ha.physicalSlots) == 0 {
		return nil // nothing to fail over to
	}
	physical := strings.Join(f.ha.physicalSlots, ", ")
	if strings.TrimSpace(*v) == "" {
		fix := "Set synchronized_standby_slots to the physical slots of the standbys that may be promoted"
		if physical != "" {
			fix += " (this server has: " + physical + ")"
		}
		return one(check.Warning(name, "empty: walrelay can publish a message before a standby has its WAL, and a standby promoted then never had it",
			fix+", and reload."))
	}
	var missing []string
	for _, n := range strings.Split(*v, ",") {
		if n = strings.TrimSpace(n); n != "" && !slices.Contains(f.ha.physicalSlots, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return one(check.Warning(name, fmt.Sprintf("%s: no physical slot %s on this server; logical decoding waits for it", *v, strings.Join(missing, ", ")),
			"Name only the physical slots of live standbys (this server has: "+physical+"), and reload."))
	}
	return one(check.Pass(name, *v+": walrelay receives only WAL these standbys have"))
}

// oneLineText is err's text on one line (pgconn lists one line per address
// it tried), for a check's found column.
func oneLineText(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ")
}
