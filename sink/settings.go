package sink

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
)
