package slot

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/walrelay/walrelay/internal/check"
)

// standbyFacts are what a standby's settings say of the failover slot's
// chances there (PostgreSQL 17 and later synchronise it).
type standbyFacts struct {
	addr       string
	inRecovery bool
	versionNum int
	// syncSlots is sync_replication_slots (17 and later; nil before).
	syncSlots       *string
	hotStandbyFeed  string // hot_standby_feedback
	primarySlotName string // primary_slot_name
	// slot is the standby's copy of walrelay's slot: exists, synced, and a
	// temporary copy (a copy that would not survive a promotion yet).
	slotExists, synced, temporary bool
}

// standbyAddrs are the hosts of the connection string other than the one
// walrelay reached: with target_session_attrs=read-write, the standbys a
// failover would promote.
func standbyAddrs(pc *pgconn.Config, reached string) []*pgconn.FallbackConfig {
	var out []*pgconn.FallbackConfig
	seen := map[string]bool{reached: true}
	all := append([]*pgconn.FallbackConfig{{Host: pc.Host, Port: pc.Port, TLSConfig: pc.TLSConfig}}, pc.Fallbacks...)
	for _, fb := range all {
		if strings.HasPrefix(fb.Host, "/") {
			continue // a Unix socket is this machine's server, not a standby's
		}
		addrs := hostAddrs(fb.Host, fb.Port)
		if slices.ContainsFunc(addrs, func(a string) bool { return seen[a] }) {
			continue
		}
		for _, a := range addrs {
			seen[a] = true
		}
		out = append(out, fb)
	}
	return out
}

// hostAddrs are the host:port forms of a host of the connection string:
// as written and, for a name, each address it resolves to (the reached
// address is an IP).
func hostAddrs(host string, port uint16) []string {
	p := strconv.Itoa(int(port))
	out := []string{net.JoinHostPort(host, p)}
	if ips, err := net.LookupHost(host); err == nil {
		for _, ip := range ips {
			out = append(out, net.JoinHostPort(ip, p))
		}
	}
	return out
}

// checkStandbys reports, for each other server of the connection string,
// whether a failover to it keeps walrelay's slot: a standby of 17 or later
// with sync_replication_slots, hot_standby_feedback and primary_slot_name,
// holding a synced, persistent copy of the slot.
func checkStandbys(ctx context.Context, cfg *Config, reached, slot string) []check.Result {
	cc, err := cfg.sessionConfig()
	if err != nil {
		return nil
	}
	pc := &cc.Config
	var out []check.Result
	for _, fb := range standbyAddrs(pc, reached) {
		out = append(out, standbyResult(readStandby(ctx, pc, fb, slot)))
	}
	return out
}

// readStandby connects to one host of the connection string, whatever it
// is (no read-write requirement), and reads its facts.
func readStandby(ctx context.Context, pc *pgconn.Config, fb *pgconn.FallbackConfig, slot string) (standbyFacts, error) {
	one := pc.Copy()
	one.Host, one.Port, one.TLSConfig, one.Fallbacks = fb.Host, fb.Port, fb.TLSConfig, nil
	one.ValidateConnect = nil
	sf := standbyFacts{addr: net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))}
	cc, err := pgx.ParseConfig("")
	if err != nil {
		return sf, err
	}
	cc.Config = *one
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return sf, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	err = conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int,
		current_setting('sync_replication_slots', true), current_setting('hot_standby_feedback'), current_setting('primary_slot_name'),
		EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = $1),
		coalesce((SELECT (to_jsonb(s)->>'synced')::bool FROM pg_replication_slots s WHERE slot_name = $1), false),
		coalesce((SELECT temporary FROM pg_replication_slots WHERE slot_name = $1), false)`, slot).
		Scan(&sf.inRecovery, &sf.versionNum, &sf.syncSlots, &sf.hotStandbyFeed, &sf.primarySlotName, &sf.slotExists, &sf.synced, &sf.temporary)
	return sf, err
}

// standbyResult judges one other server of the connection string.
func standbyResult(sf standbyFacts, err error) check.Result {
	name := "standby " + sf.addr
	switch {
	case err != nil:
		return check.Warning(name, "cannot read: "+err.Error(),
			"Make the server reachable for walrelay's role, or leave it out of "+SettingConnString+" if it is no standby of this primary.")
	case !sf.inRecovery:
		return check.Warning(name, "not in recovery: a second primary in the connection string",
			"List only the primary and its standbys in "+SettingConnString+".")
	case sf.versionNum < failoverVersion:
		return check.Warning(name, "a standby without failover slots (before PostgreSQL 17): a failover to it loses the slot",
			"Upgrade to PostgreSQL 17 or newer; until then a failover takes `walrelay recover` on the new primary ("+lostSlotProcedure+").")
	}
	var missing []string
	if sf.syncSlots == nil || *sf.syncSlots != "on" {
		missing = append(missing, "sync_replication_slots = on")
	}
	if sf.hotStandbyFeed != "on" {
		missing = append(missing, "hot_standby_feedback = on")
	}
	if sf.primarySlotName == "" {
		missing = append(missing, "primary_slot_name (its physical slot on the primary)")
	}
	if len(missing) > 0 {
		return check.Warning(name, "does not synchronise failover slots: "+strings.Join(missing, ", ")+" missing",
			"Set "+strings.Join(missing, ", ")+" on the standby (and dbname in its primary_conninfo), and reload it.")
	}
	switch {
	case !sf.slotExists || !sf.synced:
		return check.Warning(name, "synchronises failover slots, but has no synced copy of the slot yet",
			"Wait for the slot sync worker, and check that the slot is a failover slot and the standby's physical slot is in synchronized_standby_slots.")
	case sf.temporary:
		return check.Warning(name, "its copy of the slot is still temporary: a promotion now would drop it",
			"Wait until the copy is persistent: the standby must have replayed past the slot's position on the primary.")
	}
	return check.Pass(name, fmt.Sprintf("a standby with a synced copy of the slot: a failover to it keeps the slot (primary_slot_name %s)", sf.primarySlotName))
}
