package state

import "testing"

// For the external suite test (suite_test.go): stores as this package's
// own tests make them.

func OpenTestFileStoreForSuite(t *testing.T) Store { return openTestFileStore(t, t.TempDir()) }

func OpenTestHTTPStoreForSuite(t *testing.T) Store {
	srv := newStateServer(t)
	return newTestHTTPStore(t, srv, WithHeader("Authorization", srv.auth))
}
