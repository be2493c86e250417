package config

// Enums are the values allowed for each key that takes one of a few, by
// path: Validate refuses others, and the reference (docs/config.md) lists
// them.
var Enums = map[string][]string{
	"source.type":   Types,
	"target.type":   Types,
	"ancestors":     {AncestorsRoot, AncestorsAll},
	"write.mode":    {ModeUpsert, ModeInsert},
	"write.shuffle": {ShuffleAuto, ShuffleAlways, ShuffleNever},
	"write.indexes": {IndexesAfter, IndexesBefore, IndexesNone},
	"ramp.profile":  {RampNone, RampDatastore, RampGCS, RampCustom},
}
