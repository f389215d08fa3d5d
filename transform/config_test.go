package transform

import (
	"testing"

	"github.com/ferryhq/ferry/config"
	"github.com/stretchr/testify/require"
)

// sinkHeader is a sink file up to its transforms.
const sinkHeader = "type = \"sink\"\nkey = \"s\"\npath = \"stdout\"\n[[streams]]\nstream = \"s\"\ntopics = [\"t\"]\n"

// TestBadTransformTables: a transform table as the file writes it that
// its spec refuses names every problem at once, in the order of the file,
// with the file, line and key path.
func TestBadTransformTables(t *testing.T) {
	t.Parallel()
	for i, tc := range []struct {
		toml string
		want string
	}{
		{"[transforms.add_fields]\n[[transforms.add_fields.field]]\nkey = \"k\"\nvalue.static = 1\n",
			`s.toml:8: transforms.add_fields.field: unknown key; did you mean "fields"?`},
		{"[[transforms.add_fields.fields]]\nkey = \"k\"\nvalue.computed = \"timestamp_milis\"\n",
			`s.toml:9: transforms.add_fields.fields[0].value.computed: expected one of "date_time", "timestamp_nanos", ` +
				`"timestamp_micros", "timestamp_millis", "timestamp_seconds", "uuid_v4", "uuid_v7", got "timestamp_milis"; ` +
				`did you mean "timestamp_millis"?`},
		{"[[transforms.add_fields.fields]]\nkey = \"k\"\nvalue = { static = 1, computed = \"uuid_v4\" }\n",
			"s.toml:9: transforms.add_fields.fields[0].value: expected one of the keys static, computed, got static and computed together"},
		{"[[transforms.update_fields.fields]]\nname = \"k\"\nvalue.static = 1\ncondition = \"key_exist\"\n",
			"3 configuration errors:\n" +
				"  s.toml:8: transforms.update_fields.fields[0].name: unknown key; allowed keys here: condition, key, value\n" +
				`  s.toml:10: transforms.update_fields.fields[0].condition: expected one of "always", "key_exists", "key_not_exists", ` +
				`got "key_exist"; did you mean "key_exists"?` + "\n" +
				"  s.toml:7: transforms.update_fields.fields[0].key: required key is missing; expected a string"},
		{"[transforms.delete_fields]\nfields = \"password\"\n",
			`s.toml:8: transforms.delete_fields.fields: expected a list of strings, got the string "password"; write ["password"]`},
		{"[transforms.filter_fields]\ninclude_matching = \"false\"\n[[transforms.filter_fields.patterns]]\n" +
			"key_pattern = { starts_with = \"a\", regex = \"^a\" }\nvalue_pattern = { between = [1, 2, 3] }\n",
			"3 configuration errors:\n" +
				"  s.toml:8: transforms.filter_fields.include_matching: expected true or false, got the string \"false\"; write it without quotes\n" +
				"  s.toml:10: transforms.filter_fields.patterns[0].key_pattern: expected one of the keys exact, starts_with, " +
				"ends_with, contains, regex, got starts_with and regex together\n" +
				"  s.toml:11: transforms.filter_fields.patterns[0].value_pattern.between: expected a list of 2 numbers, got 3 items"},
		{"[[transforms.filter_fields.patterns]]\nvalue_pattern = { grater_than = 1 }\n",
			`s.toml:8: transforms.filter_fields.patterns[0].value_pattern.grater_than: unknown key; did you mean "greater_than"?`},
		{"[[transforms.delete_fields.patterns]]\nvalue_pattern = 3\n",
			`s.toml:8: transforms.delete_fields.patterns[0].value_pattern: expected one of "is_null", "is_not_null", "is_string", ` +
				`"is_number", "is_boolean", "is_object", "is_array" or a table, got an integer (3)`},
		{"[transforms.unwrap_envelope]\nfield = 1\n",
			"s.toml:8: transforms.unwrap_envelope.field: expected a string, got an integer (1)"},
		{"[transforms.avro_convert]\ntarget_format = \"avroo\"\n",
			`s.toml:8: transforms.avro_convert.target_format: expected one of "json", "raw", "text", "proto", "avro", "flat_buffer", ` +
				`got "avroo"; did you mean "avro"?`},
		{"[transforms.proto_convert]\ndescriptor_set = [1, 256]\ninclude_paths = \"schemas\"\n",
			"2 configuration errors:\n" +
				"  s.toml:8: transforms.proto_convert.descriptor_set[1]: expected an integer from 0 to 255, got 256\n" +
				`  s.toml:9: transforms.proto_convert.include_paths: expected a list of strings, got the string "schemas"; write ["schemas"]`},
		{"[transforms.flatbuffer_convert]\nconversion_options.pretty_json = \"yes\"\n",
			`s.toml:8: transforms.flat_buffer_convert.conversion_options.pretty_json: expected true or false, got "yes"`},
	} {
		c, err := config.ParseConnector("s.toml", []byte(sinkHeader+tc.toml))
		require.NoError(t, err, "case %d", i)
		var specs []Spec
		for _, tr := range c.Transforms {
			specs = append(specs, Spec{Name: tr.Name, Config: tr.Config, Source: "s.toml", Lines: tr.Lines})
		}
		_, err = Build(specs)
		require.EqualError(t, err, tc.want, "case %d", i)
	}
}
