// Package secretfile reads a secret (a password) from a file, the one way
// walrelay does it for PostgreSQL and Kafka: the content without one
// trailing line break, never empty, and errors that name the file, never
// its content.
//
// Internal: walrelay's own, shared by its packages.
package secretfile

import (
	"fmt"
	"os"
	"strings"
)

// Read returns the file's content without one trailing line break (\n,
// \r\n or \r). A file that holds nothing else, or holds a NUL byte (which
// no PostgreSQL password can), is an error.
func Read(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err // *fs.PathError: the operation, the path and the reason
	}
	pw := strings.TrimSuffix(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	switch {
	case pw == "":
		return "", fmt.Errorf("%s holds no password", path)
	case strings.IndexByte(pw, 0) >= 0:
		return "", fmt.Errorf("%s holds a NUL byte, which no PostgreSQL password can", path)
	}
	return pw, nil
}
