#!/bin/sh
# The broker (and, in KRaft combined mode, controller) on the given properties.
export KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xmx1G -Xms1G}"
exec "$(dirname "$0")/kafka-run-class.sh" kafka.Kafka "$@"
