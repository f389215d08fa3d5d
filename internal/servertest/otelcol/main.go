// Command otelcol is the OpenTelemetry Collector the tests of package
// telemetry export to: the otlp receiver (grpc and http) and the file
// exporter of collector-contrib, nothing else. It is its own Go module,
// outside the main one, built by scripts/test.sh; its version is the
// collector release its go.mod names.
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	var f otelcol.Factories
	f.Receivers = map[component.Type]receiver.Factory{}
	for _, r := range []receiver.Factory{otlpreceiver.NewFactory()} {
		f.Receivers[r.Type()] = r
	}
	f.Exporters = map[component.Type]exporter.Factory{}
	for _, e := range []exporter.Factory{fileexporter.NewFactory()} {
		f.Exporters[e.Type()] = e
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "ferry-otelcol",
			Description: "OpenTelemetry Collector for Ferry's tests (otlp receiver, file exporter)",
			Version:     "v0.161.0",
		},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
