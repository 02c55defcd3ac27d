//go:build !unix

package sqlitestore

import (
	"errors"
	"os"
)

// Outside Unix there are no ties: TieSession reports errors.ErrUnsupported.
const tieLocksSupported = false

type fileKey struct{ dev, ino uint64 }

func lockTieFile(string, os.FileMode) (*os.File, fileKey, error) {
	return nil, fileKey{}, errors.ErrUnsupported
}
func tieFree(string, fileKey) (bool, error)      { return false, nil }
func awaitTieFree(string, fileKey) (bool, error) { return false, errors.ErrUnsupported }
func sameFile(string, *os.File) bool             { return true }

func openTie(string, fileKey) (*os.File, error) { return nil, nil }
