package exec

import (
	"errors"
	"strings"
	"time"

	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/internal/envx"
)

// Orderings.
const (
	OrderingPartition = "partition"
	OrderingNone      = "none"
)

// Limits of the plugin_config.
const (
	maxConcurrency = 1024
	maxOutputLimit = 1 << 20
)

// Spec is the exec sink's plugin_config; see the package documentation.
var Spec = connector.NewSpec(
	connector.NewStringField("command").Require().WithExample("echo {payload}").WithCheck(checkCommand).
		WithDoc("shell command line run for each message; {payload}, {offset}, {stream}, {topic}, {partition}, {id} and {timestamp} arrive as data"),
	connector.NewStringField("shell").WithDefault("/bin/sh").WithCheck(noNUL).
		WithDoc("run as: <shell> -c <command>"),
	connector.NewStringField("working_dir").WithCheck(noNUL).WithExample("/srv/app").
		WithDoc("the command's directory; default the runtime's working directory"),
	connector.NewMapField("env", connector.NewStringField("").WithCheck(noNUL)).WithExample(map[string]string{"APP_ENV": "production"}).
		WithDoc("variables added to the runtime's environment (the FERRY_* names are Ferry's)"),
	connector.NewListField("pass_env", connector.NewStringField("").WithCheck(func(v any) error { return envx.CheckPattern(v.(string)) })).
		WithExample([]string{"IGGY_CONNECTORS_SINK_APP_*"}).
		WithDoc(`withheld variables to pass anyway: names, or prefixes ending in "*"; ["*"] passes everything`),
	connector.NewDurationField("timeout").WithDefault(time.Minute).
		WithDoc("per run, after which the whole process group is killed; 0 = none"),
	connector.NewIntField("concurrency").Between(1, maxConcurrency).WithDefault(1).
		WithDoc("commands running at once in this sink"),
	connector.NewEnumField("ordering", OrderingPartition, OrderingNone).WithDefault(OrderingPartition).
		WithDoc(`"partition": one partition's messages run one at a time in offset order; "none": a batch runs in parallel`),
	connector.NewIntField("output_limit").Between(1, maxOutputLimit).WithDefault(4096).
		WithDoc("bytes of stdout and of stderr kept for the log"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	for k := range s.StringMap("env") {
		if err := checkEnvName(k); err != nil {
			fail("env."+k, "%v", err)
		}
	}
})

func checkCommand(v any) error {
	if strings.TrimSpace(v.(string)) == "" {
		return errors.New("expected a command, got an empty string")
	}
	_, _, err := Rewrite(v.(string))
	return err
}

func noNUL(v any) error {
	if strings.IndexByte(v.(string), 0) >= 0 {
		return errors.New("must not contain a NUL byte")
	}
	return nil
}
