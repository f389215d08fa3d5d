// Package s3test gives tests a real S3 server: Versity's S3 gateway
// (versitygw v1.8.0) with its POSIX backend in a temporary directory,
// through servertest. It is the server scripts/test.sh started
// (FERRY_TEST_S3_URL), or one the test binary starts for itself;
// FERRY_REQUIRE_S3=1 turns a skip for want of it into a failure. The
// program is FERRY_VERSITYGW_SERVER, or versitygw on PATH.
//
// The URL is the endpoint with the root user's keys as its userinfo,
// http://ACCESS:SECRET@127.0.0.1:PORT; a server this package starts uses
// the fixed test keys AccessKey and SecretKey. Tests keep apart by
// buckets of their own (Bucket). A test that takes the server down gets
// one of its own with Private, and stops and starts it with Halt and
// Resume (same port, same data).
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
package s3test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ferryhq/ferry/internal/servertest"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// The root user's keys of a server this package starts.
const (
	AccessKey = "ferrytestaccess"
	SecretKey = "ferrytestsecret0123456789"
)

// Region is the gateway's region.
const Region = "us-east-1"

// Server is the S3 kind of test server.
var Server = &servertest.Server{
	Name:       "S3 (versitygw)",
	URLEnv:     "FERRY_TEST_S3_URL",
	RequireEnv: "FERRY_REQUIRE_S3",
	Start:      start,
}

var buckets atomic.Int64

// Main runs the tests and stops a server they started.
func Main(m *testing.M) { servertest.Main(m, Server) }

// URL returns the shared server's URL, keys in its userinfo.
func URL(tb testing.TB) string { tb.Helper(); return Server.URL(tb) }

// Target is a server's endpoint and keys, split out of its URL.
type Target struct {
	Endpoint          string // http://127.0.0.1:PORT
	AccessKey, Secret string
}

// Parse splits a server URL into its endpoint and keys.
func Parse(tb testing.TB, raw string) Target {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatalf("s3test: server URL: %v", err)
	}
	t := Target{AccessKey: AccessKey, Secret: SecretKey}
	if u.User != nil {
		t.AccessKey = u.User.Username()
		t.Secret, _ = u.User.Password()
	}
	u.User = nil
	t.Endpoint = u.String()
	return t
}

// Shared is the shared server's endpoint and keys.
func Shared(tb testing.TB) Target { tb.Helper(); return Parse(tb, URL(tb)) }

// Client is a minio client of the target.
func (t Target) Client(tb testing.TB) *minio.Client {
	tb.Helper()
	u, _ := url.Parse(t.Endpoint)
	c, err := minio.New(u.Host, &minio.Options{
		Creds: credentials.NewStaticV4(t.AccessKey, t.Secret, ""), Secure: u.Scheme == "https",
		Region: Region, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		tb.Fatalf("s3test: client: %v", err)
	}
	return c
}

// Bucket creates a bucket only the calling test uses on the target and
// returns its name; it is emptied and removed when the test ends.
func (t Target) Bucket(tb testing.TB) string {
	tb.Helper()
	c := t.Client(tb)
	name := fmt.Sprintf("ferry-test-%d-%d", os.Getpid(), buckets.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		tb.Fatalf("s3test: make bucket %s: %v", name, err)
	}
	tb.Cleanup(func() { RemoveBucket(c, name) })
	return name
}

// Bucket creates a bucket on the shared server only the calling test
// uses.
func Bucket(tb testing.TB) string { tb.Helper(); return Shared(tb).Bucket(tb) }

// RemoveBucket removes a bucket and everything in it, best effort.
func RemoveBucket(c *minio.Client, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for o := range c.ListObjects(ctx, name, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err == nil {
			_ = c.RemoveObject(ctx, name, o.Key, minio.RemoveObjectOptions{})
		}
	}
	_ = c.RemoveBucket(ctx, name)
}

// Own is a server only one test uses (Private), with its endpoint and
// keys, Halt and Resume.
type Own struct {
	Target
	*servertest.Own
}

// Private starts a server only the calling test uses; it is stopped at
// the end of the test.
func Private(tb testing.TB) *Own {
	tb.Helper()
	o := Server.Private(tb)
	return &Own{Target: Parse(tb, o.URL), Own: o}
}

// start runs versitygw's POSIX backend on a free loopback port with its
// buckets in a directory of its own.
func start() (*servertest.Process, string, error) {
	bin, err := servertest.Find("FERRY_VERSITYGW_SERVER", "versitygw")
	if err != nil {
		return nil, "", fmt.Errorf("%w; go install github.com/versity/versitygw/cmd/versitygw@v1.8.0", err)
	}
	dir, err := servertest.TempDir("s3")
	if err != nil {
		return nil, "", err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, "", fmt.Errorf("s3 data dir: %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := servertest.FreePort()
		if err != nil {
			return nil, "", err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		p, err := servertest.Start(servertest.Command{
			Args: []string{bin, "--access", AccessKey, "--secret", SecretKey, "--region", Region,
				"--port", addr, "--quiet", "posix", data},
			Env:     []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")},
			Dir:     dir,
			Timeout: 30 * time.Second,
			Ready: func() error {
				// Any HTTP answer (403 without a signature) means it serves.
				resp, err := http.Get("http://" + addr + "/")
				if err != nil {
					return err
				}
				return resp.Body.Close()
			},
		})
		if err == nil {
			return p, fmt.Sprintf("http://%s:%s@%s", AccessKey, SecretKey, addr), nil
		}
		lastErr = err
	}
	_ = os.RemoveAll(dir)
	return nil, "", lastErr
}
