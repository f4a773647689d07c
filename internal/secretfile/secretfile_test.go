package secretfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for content, want := range map[string]string{
		"s3cret":        "s3cret",
		"s3cret\n":      "s3cret",
		"s3cret\r\n":    "s3cret",
		"s3cret\r":      "s3cret",
		"s3cret\n\n":    "s3cret\n", // one line break only
		" s3 cret \t\n": " s3 cret \t",
	} {
		if got, err := Read(write("pw", content)); err != nil || got != want {
			t.Errorf("Read of %q: got %q, %v; want %q", content, got, err, want)
		}
	}
	for name, path := range map[string]string{
		"missing":     filepath.Join(dir, "nothing-here"),
		"a directory": dir,
		"empty":       write("empty", "\n"),
		"NUL byte":    write("nul", "s3cret\x00more"),
	} {
		_, err := Read(path)
		if err == nil {
			t.Errorf("%s: got nil error; want one", name)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, path) || strings.Contains(msg, "s3cret") {
			t.Errorf("%s: got %q; want the path named, never the content", name, msg)
		}
	}
}
