package slot

// The settings this package's errors and fixes ask to change, named as its
// types name them, so that a program with names of its own for them
// (walrelay's command line) can say them its way.
const (
	SettingConnString      = "slot.Config.ConnString"
	SettingSlot            = "slot.Config.Slot"
	SettingTable           = "slot.Config.Table"
	SettingMaxMessageBytes = "slot.Config.MaxMessageBytes"
)
