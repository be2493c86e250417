package config

// The reference of every key (docs/config.md) and of every strategy
// parameter (docs/strategies.md) is generated from this package and the
// rewrite package; gendocs' test fails while docs/ is stale.
//go:generate go run ./gendocs -root ../..
