//go:build !unix

package apitoken

import (
	"fmt"
	"os"
)

// checkPrivate checks that dir is a directory; elsewhere than Unix the
// user's configuration directory is private by the system's defaults.
func checkPrivate(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}
