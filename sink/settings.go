package sink

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

// The settings this package's check fixes ask to change, named as its types
// name them, so that a program with names of its own for them (walrelay's
// command line) can say them its way.
const (
	SettingBrokers    = "sink.Config.Brokers"
	SettingTLS        = "sink.Config.TLS"
	SettingTLSTrust   = "sink.Config.TLS.RootCAs and ServerName"
	SettingClientCert = "sink.Config.TLS.Certificates"
	SettingSASL       = "sink.Config.SASL"
	// SettingMessageIDHeader names Config.MessageIDHeader in errors.
	SettingMessageIDHeader = "sink.Config.MessageIDHeader"
	// SettingCompression names Config.Compression in errors.
	SettingCompression = "sink.Config.Compression"
	// SettingIdempotence names Config.NoIdempotence in fixes.
	SettingIdempotence = "sink.Config.NoIdempotence"
)

// ParseCompression is the codec named name: none, gzip, snappy, lz4 or
// zstd (kafka-go's codecs, as Kafka's compression.type names them).
func ParseCompression(name string) (kafka.Compression, error) {
	var c compress.Compression
	if err := c.UnmarshalText([]byte(name)); err != nil || strings.TrimLeft(name, "0123456789") == "" {
		return 0, fmt.Errorf("%s %q: want none, gzip, snappy, lz4 or zstd", SettingCompression, name)
	}
	return kafka.Compression(c), nil
}
