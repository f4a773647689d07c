//go:build !failpoints

package failpoint

// Inject does nothing: this binary was built without failpoints.
func Inject(string) {}
