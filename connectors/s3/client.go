package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ferryhq/ferry/connector"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// connectionFields are the keys that say where the bucket is, shared by
// the sink (upstream's names) and the source.
func connectionFields() []connector.Field {
	return []connector.Field{
		connector.NewStringField("bucket").Require().WithExample("my-data-lake").WithCheck(checkBucket).
			WithDoc("the bucket"),
		connector.NewStringField("region").Require().WithExample("us-east-1").WithDoc(`its region ("auto" for R2)`),
		connector.NewStringField("prefix").WithDefault("").WithDoc("key prefix of every object"),
		connector.NewStringField("endpoint").WithDefault("").WithCheck(checkEndpoint).
			WithDoc("an S3-compatible server, http:// or https:// (MinIO, R2 ...); empty is AWS"),
		connector.NewStringField("access_key_id").AsSecret().WithDefault("").
			WithDoc("the access key; omit both keys for AWS_* variables or the instance profile"),
		connector.NewStringField("secret_access_key").AsSecret().WithDefault("").WithDoc("the secret key (a secret)"),
		connector.NewBoolField("path_style").WithDoc("path-style addressing; default: on when endpoint is set"),
	}
}

func lintCredentials(s *connector.Settings, fail connector.FailFunc) {
	if (s.String("access_key_id") == "") != (s.String("secret_access_key") == "") {
		key := "secret_access_key"
		if s.String("access_key_id") == "" {
			key = "access_key_id"
		}
		fail(key, "set both access_key_id and secret_access_key, or neither")
	}
}

// checkBucket accepts S3's bucket names: 3 to 63 lowercase letters,
// digits, dots and dashes (a name is a path segment or a host name, so
// nothing else may reach a URL).
func checkBucket(v any) error {
	s, _ := v.(string)
	ok := len(s) >= 3 && len(s) <= 63
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-'
	}
	if !ok || strings.Trim(s, ".-") != s || strings.Contains(s, "..") {
		return fmt.Errorf("%q is not an S3 bucket name (3-63 of a-z 0-9 . -, starting and ending with a letter or digit)", s)
	}
	return nil
}

func checkEndpoint(v any) error {
	s, _ := v.(string)
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") {
		return errors.New("expected http:// or https:// and a host, without a path or credentials")
	}
	return nil
}

// bucketConn is a client of one bucket.
type bucketConn struct {
	client *minio.Client
	bucket string
	where  string // for messages: s3://bucket at endpoint
}

// dial builds the client of the settings' bucket (no request is sent).
func dial(set *connector.Settings, transport http.RoundTripper) (*bucketConn, error) {
	host, secure, where := "s3.amazonaws.com", true, "AWS"
	if e := set.String("endpoint"); e != "" {
		u, _ := url.Parse(e)
		host, secure, where = u.Host, u.Scheme == "https", u.Host
	}
	var creds *credentials.Credentials
	if id := set.String("access_key_id"); id != "" {
		creds = credentials.NewStaticV4(id, set.String("secret_access_key"), "")
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{}, &credentials.FileAWSCredentials{}, &credentials.IAM{},
		})
	}
	pathStyle := set.String("endpoint") != ""
	if set.Has("path_style") {
		pathStyle = set.Bool("path_style")
	}
	lookup := minio.BucketLookupDNS
	if pathStyle {
		lookup = minio.BucketLookupPath
	}
	region := set.String("region")
	if region == "auto" {
		region = "" // R2: any region signs; minio asks the server otherwise
	}
	c, err := minio.New(host, &minio.Options{
		Creds: creds, Secure: secure, Region: region, BucketLookup: lookup, Transport: transport,
		MaxRetries: 1, // the connectors retry with their own schedule
	})
	if err != nil {
		return nil, set.Errorf("endpoint", "S3 client: %v", err)
	}
	b := set.String("bucket")
	return &bucketConn{client: c, bucket: b, where: fmt.Sprintf("s3://%s at %s", b, where)}, nil
}

// check fails unless the bucket exists and the keys may see it.
func (c *bucketConn) check(ctx context.Context) error {
	ok, err := c.client.BucketExists(ctx, c.bucket)
	if err != nil {
		return c.classify(fmt.Errorf("bucket %s: %w", c.where, err))
	}
	if !ok {
		return fmt.Errorf("bucket %q (plugin_config.bucket) does not exist at %s", c.bucket, c.where)
	}
	return nil
}

// classify marks err: a server that is down, slow, overloaded or
// refusing the keys or the bucket is Unavailable (no message is at fault:
// S3 takes any bytes), and context ends stay as they are.
func (c *bucketConn) classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return connector.Unavailable(err)
}

// describe renders an S3 error answer with its code, for messages.
func describe(err error) string {
	r := minio.ToErrorResponse(err)
	if r.Code == "NoSuchBucket" {
		return fmt.Sprintf("the bucket does not exist (plugin_config.bucket; 404 %s)", r.Code)
	}
	if r.Code != "" {
		return fmt.Sprintf("%s (%d %s)", r.Message, r.StatusCode, r.Code)
	}
	return err.Error()
}
