package slot

// The settings walrelay's fixes and errors ask to change, named as they
// are today on walrelay's command line.
const (
	SettingConnString = "--postgres-url"
	SettingSlot       = "--slot"
	SettingTable      = "--table"
)
