package leader

import "context"

// SetBeforeCheck installs f to run before every check of the lock. Call it
// before Run.
func SetBeforeCheck(e *Elector, f func(ctx context.Context)) { e.beforeCheck = f }
