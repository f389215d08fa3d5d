// Package connector is what connector authors import: the Source and Sink
// contracts, the Message that flows between them and Iggy, how a connector
// reads its plugin_config, and the registry that maps a connector file's
// `path` to the code that runs it.
//
// A source turns an external system into batches of messages; the runtime
// sends each batch to every configured Iggy stream, saves the batch's state,
// and only then acknowledges it (Acker.Ack). A sink receives batches read
// from Iggy; the runtime stores the consumer offset only after Consume
// returns nil, so a sink that fails loses nothing.
//
// Connectors register themselves from an init function:
//
//	func init() {
//		connector.MustRegister(connector.Info{
//			Kind:      connector.KindSource,
//			Name:      "random",
//			Aliases:   []string{"libiggy_connector_random_source"},
//			NewSource: newRandom,
//		})
//	}
//
// and a program includes them with a blank import of their package (see
// package connectors/all).
package connector
