//go:build ferrydeps

// Package internal holds, for one working session, the imports that keep
// the modules the new connectors will use in go.mod; removed before the
// session ends.
package internal

import (
	_ "github.com/eclipse/paho.mqtt.golang"
	_ "github.com/nats-io/nats.go"
	_ "github.com/nats-io/nats.go/jetstream"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
)
