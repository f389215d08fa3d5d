package mqtt

import (
	"log"
	"os"

	paho "github.com/eclipse/paho.mqtt.golang"
)

func init() {
	if os.Getenv("PAHO_DEBUG") != "" {
		paho.DEBUG = log.New(os.Stderr, "PAHO ", log.Lmicroseconds)
	}
	paho.ERROR = log.New(os.Stderr, "PAHO ERROR ", log.Lmicroseconds)
	paho.WARN = log.New(os.Stderr, "PAHO WARN ", log.Lmicroseconds)
}
