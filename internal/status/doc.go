// Package status is `walrelay status`: one reading of what decides whether
// walrelay run can stream, taken over one connection and printed for
// people (an aligned table) or for scripts (JSON). A reading holds the
// slot's figures (lag, retained WAL, wal_status, failover), the
// publication, the leader (who holds the slot's advisory lock) and the
// slot's last `walrelay recover`.
//
// Reading and printing are apart so that printing is plain code over
// values: Read does the I/O once; WriteTable, WriteJSON and Problem only
// look at what it read. A missing slot or publication is a reading, not an
// error: status is run when things are wrong, and says what is wrong.
// Problem says whether the reading stops walrelay run, which the CLI turns
// into its exit code.
//
// Internal: walrelay's own, for `walrelay status`.
package status
