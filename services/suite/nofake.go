//go:build nokfake

package suite

import "errors"

// FakeKafka reports whether this build can start franz-go's kfake: not in
// a build with -tags nokfake (the production image), where the all-in-one
// runner needs KAFKA_BROKERS.
const FakeKafka = false

func startFakeKafka() ([]string, func(), error) {
	return nil, nil, errors.New("this build has no fake Kafka (built with -tags nokfake, as the production image is): set KAFKA_BROKERS")
}
