package decoder

// SettingAggregateTypeDefault names Config.AggregateTypeDefault in errors
// and fixes, so that a program with a name of its own for it (walrelay's
// --aggregate-type-default) can say it its way. The columns' settings are
// schema.Field.Setting.
const SettingAggregateTypeDefault = "decoder.Config.AggregateTypeDefault"
