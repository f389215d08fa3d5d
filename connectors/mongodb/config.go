package mongodb

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

func uriField() connector.Field {
	return connector.NewStringField("connection_uri").Require().AsSecret().WithExample("mongodb://localhost:27017").
		WithCheck(checkURI).WithDoc("the server, mongodb:// or mongodb+srv://, with any credentials (a secret: never logged)")
}

func databaseField() connector.Field {
	return connector.NewStringField("database").Require().WithExample("iggy_messages").WithCheck(checkDatabase).
		WithDoc("the database")
}

func collectionField(example string) connector.Field {
	return connector.NewStringField("collection").Require().WithExample(example).WithCheck(checkCollection).
		WithDoc("the collection")
}

// SinkSpec is the sink's plugin_config: upstream's keys
// (libiggy_connector_mongodb_sink), then Ferry's.
var SinkSpec = connector.NewSpec(
	uriField(),
	databaseField(),
	collectionField("messages"),
	connector.NewIntField("max_pool_size").Between(0, 1<<31-1).WithDefault(0).
		WithDoc("most connections to the server (0: the driver's default, 100)"),
	connector.NewBoolField("auto_create_collection").WithDefault(false).WithDoc("create the collection at start when it is missing"),
	connector.NewIntField("batch_size").AtLeast(1).WithDefault(100).WithDoc("most documents per insertMany"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add iggy_offset, iggy_timestamp, iggy_stream, iggy_topic and iggy_partition_id"),
	connector.NewBoolField("include_checksum").WithDefault(true).WithDoc("add iggy_checksum"),
	connector.NewBoolField("include_origin_timestamp").WithDefault(true).WithDoc("add iggy_origin_timestamp"),
	connector.NewEnumField("payload_format", "binary", "json", "string").WithAliases(map[string]string{"text": "string"}).
		WithDefault("binary").WithDoc("payload as: binary (BSON binary), json (an embedded document or value), string (UTF-8 text)"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each batch at info instead of debug"),
	connector.NewIntField("max_retries").Between(1, 1000).WithDefault(3).WithDoc("attempts of an insert that failed transiently, inside one batch"),
	connector.NewDurationField("retry_delay").WithDefault(time.Second).WithDoc("wait after the first failed attempt, growing by itself each attempt"),
	connector.NewSizeField("max_document_size").AtLeast(1).WithDefault(int64(16<<20)).
		WithDoc("Ferry: documents larger are refused before sending (the server's own maxBsonObjectSize applies when smaller)"),
	connector.NewEnumField("id_from", "message", "key").WithDefault("message").
		WithDoc(`Ferry: the _id: "message" (upstream's stream:topic:partition:id, one document per message) or "key" (the message key, docs/keys.md: one document per key, replaced by a newer offset, deleted by a deletion marker)`),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if s.String("id_from") == "key" && !s.Bool("include_metadata") {
		fail("id_from", `"key" needs include_metadata = true: iggy_offset decides which message of a key is the latest`)
	}
})

// SourceSpec is the source's plugin_config (Ferry's; upstream has no
// MongoDB source).
var SourceSpec = connector.NewSpec(
	uriField(),
	databaseField(),
	collectionField("events"),
	connector.NewStringField("tracking_field").WithDefault("_id").WithCheck(checkFieldPath).
		WithDoc("the field read in ascending order (ties broken by _id); its values must only grow and share one BSON type"),
	connector.NewIntField("batch_size").Between(1, 100000).WithDefault(100).WithDoc("most documents per batch"),
	connector.NewDurationField("poll_interval").WithDefault(time.Second).WithDoc("wait between queries that found nothing new"),
	connector.NewStringField("payload_field").WithDefault("").WithCheck(func(v any) error {
		if v == "" {
			return nil
		}
		return checkFieldPath(v)
	}).WithDoc(`send only this field of each document ("" sends the whole document)`),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).
		WithDoc("json: relaxed Extended JSON; text: a string field's text; raw: a binary or string field's bytes"),
	connector.NewBoolField("delete_after_read").WithDefault(false).WithDoc("delete a batch's documents once it is in Iggy"),
	connector.NewStringField("processed_field").WithDefault("").WithCheck(func(v any) error {
		if v == "" {
			return nil
		}
		return checkFieldPath(v)
	}).WithDoc(`when set, documents with this field true are skipped, and it is set true once a batch is in Iggy`),
	connector.NewBoolField("include_metadata").WithDefault(true).WithDoc("add mongodb_database, mongodb_collection and mongodb_id headers"),
	connector.NewIntField("max_pool_size").Between(0, 1<<31-1).WithDefault(0).WithDoc("most connections (0: the driver's default)"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if s.String("schema") != string(connector.SchemaJSON) && s.String("payload_field") == "" {
		fail("schema", "%s needs payload_field: a whole document is sent as JSON", s.String("schema"))
	}
	if s.Bool("delete_after_read") && s.String("processed_field") != "" {
		fail("processed_field", "set with delete_after_read: choose one")
	}
	if p := s.String("processed_field"); p != "" && (p == s.String("tracking_field") || p == "_id") {
		fail("processed_field", "%q is also the tracking field or _id", p)
	}
})

func checkURI(v any) error {
	s, _ := v.(string)
	if !strings.HasPrefix(s, "mongodb://") && !strings.HasPrefix(s, "mongodb+srv://") {
		return errors.New("expected a mongodb:// or mongodb+srv:// URI")
	}
	if strings.HasPrefix(s, "mongodb+srv://") {
		return nil // resolved by DNS at connect
	}
	if err := options.Client().ApplyURI(s).Validate(); err != nil {
		return fmt.Errorf("not a valid MongoDB URI: %s", redactIn(err.Error(), s))
	}
	return nil
}

// checkDatabase applies MongoDB's rules for database names.
func checkDatabase(v any) error {
	s, _ := v.(string)
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > 63:
		return errors.New("longer than 63 bytes")
	case strings.ContainsAny(s, "/\\. \"$*<>:|?\x00"):
		return errors.New(`a database name holds none of / \ . space " $ * < > : | ? or NUL`)
	}
	return nil
}

// checkCollection applies MongoDB's rules for collection names.
func checkCollection(v any) error {
	s, _ := v.(string)
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > 255:
		return errors.New("longer than 255 bytes")
	case strings.ContainsAny(s, "$\x00"):
		return errors.New("a collection name holds no $ or NUL")
	case strings.HasPrefix(s, "system."):
		return errors.New(`names starting "system." are the server's`)
	case strings.HasPrefix(s, ".") || strings.HasSuffix(s, "."):
		return errors.New("a collection name neither starts nor ends with a dot")
	}
	return nil
}

// checkFieldPath accepts a field name or a dotted path whose parts are
// not empty and do not start with $ (so it cannot be an operator).
func checkFieldPath(v any) error {
	s, _ := v.(string)
	if s == "" {
		return errors.New("empty")
	}
	for _, part := range strings.Split(s, ".") {
		if part == "" || strings.HasPrefix(part, "$") || strings.ContainsRune(part, 0) {
			return fmt.Errorf("%q is no field path (dot-separated names, none empty or starting with $)", s)
		}
	}
	return nil
}

// redactURI is uri without its credentials, for logs and errors.
func redactURI(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "(unparsable URI)"
	}
	if at := strings.LastIndex(hostPart(rest), "@"); at >= 0 {
		rest = "****@" + rest[at+1:]
	}
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		q, err := url.ParseQuery(rest[i+1:])
		if err == nil {
			for k := range q {
				switch strings.ToLower(k) {
				case "password", "authmechanismproperties", "tlscertificatekeyfilepassword", "sslclientcertificatekeypassword":
					q.Set(k, "****")
				}
			}
			rest = rest[:i+1] + q.Encode()
		} else {
			rest = rest[:i] + "?****"
		}
	}
	return scheme + "://" + rest
}

// hostPart is the authority of a URI without its scheme: up to the first
// "/" or "?" after the last "@".
func hostPart(rest string) string {
	end := len(rest)
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		// A password may hold "/" or "?" unescaped; the last "@" before
		// the path wins.
		if at := strings.LastIndex(rest, "@"); at > i {
			if j := strings.IndexAny(rest[at:], "/?"); j >= 0 {
				return rest[:at+j]
			}
			return rest
		}
		end = i
	}
	return rest[:end]
}

// redactIn removes uri's credentials from an error text.
func redactIn(text, uri string) string {
	if u, err := url.Parse(uri); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			text = strings.ReplaceAll(text, p, "****")
		}
		if n := u.User.Username(); n != "" {
			text = strings.ReplaceAll(text, u.User.String(), "****")
		}
	}
	if _, rest, ok := strings.Cut(uri, "://"); ok {
		if at := strings.LastIndex(hostPart(rest), "@"); at > 0 {
			userinfo := rest[:at]
			text = strings.ReplaceAll(text, userinfo, "****")
			if _, pw, ok := strings.Cut(userinfo, ":"); ok && pw != "" {
				if dec, err := url.PathUnescape(pw); err == nil {
					text = strings.ReplaceAll(text, dec, "****")
				}
				text = strings.ReplaceAll(text, pw, "****")
			}
		}
	}
	return strings.ReplaceAll(text, uri, redactURI(uri))
}
