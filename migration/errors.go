package migration

import (
	"errors"
	"fmt"
)

// ConfigError is an error in what the user asked for — the config, a
// schema it names, a flag a run needs (--create-target, --force): nothing
// was done, and only a changed config or command line helps. Other errors
// (a database that cannot be reached, missing credentials, a failed
// commit) are operations that failed.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Errorf(format, args...)}
}

// IsConfigError reports whether err is, or wraps, a ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}

// ErrManifestMismatch is returned when the target was written with another
// rewrite spec.
var ErrManifestMismatch = errors.New("the target was migrated with a different rewrite")
