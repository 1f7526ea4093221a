package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary buildBinary made (about 50 MB in a temporary
// directory) once the tests are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
