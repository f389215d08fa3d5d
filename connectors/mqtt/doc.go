// Package mqtt is the `mqtt` sink and source (MQTT 3.1.1, on
// github.com/eclipse/paho.mqtt.golang v1.5.1). Upstream Iggy has no MQTT
// connector: the keys are Ferry's, named as Redpanda Connect's mqtt
// input and output name them.
//
// TODO: full doc.
//
// Tested against mosquitto 2.0.11 (Debian 12's).
package mqtt
