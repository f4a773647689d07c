// Package inbox applies walrelay's messages exactly once per consumer.
package inbox
